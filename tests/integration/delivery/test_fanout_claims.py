"""Fan-out slots are claimed, not trusted: a fan-out invocation runs only a slot reserved for its
deployment, live and never claimed, taken in one statement; a made-up, replayed or lapsed slot runs
nothing (no claim, no heartbeat), frees nothing, and the dispatch target answers it with a 2xx
problem Cloud Tasks will not retry. In production each path takes its own caller only: the
scheduler's on the scheduled path, the fan-out identity's on the fan-out path."""

from __future__ import annotations

import threading

import pytest

from signup_verification import runtime
from signup_verification.config import load
from signup_verification.delivery.fanout import Invocation, SlotNotClaimed
from signup_verification.platform.database import Database
from signup_verification.platform.errors import ConfigError
from support.auth import cloud_run_identity
from support.dispatch import Recorded, Slow, fanout_settings, run_dispatch, warm
from support.fakes.seed import seed_intents
from support.paths import TEST_TOKEN_KEYS

SCHEDULER = "verify-scheduler@p.iam.gserviceaccount.com"
FANOUT_IDENTITY = "verify-fanout@p.iam.gserviceaccount.com"


def reserve(db, slot: str, until: str = "90 seconds", claimed_by: str | None = None) -> None:
    db.run(
        "INSERT INTO dispatch_invocations (slot, deployment, started_by, until, started_at, claimed_by)"
        " VALUES (:slot, 'test', 'parent', now() + CAST(:until AS interval),"
        " CASE WHEN CAST(:by AS text) IS NOT NULL THEN now() END, :by)",
        slot=slot,
        until=until,
        by=claimed_by,
    )


def untouched(db) -> bool:
    """No intent claimed or attempted, no heartbeat written: nothing ran."""
    [[moved, beats]] = db.run(
        "SELECT (SELECT count(*) FROM delivery_intents WHERE status <> 'ready' OR lease_owner IS NOT NULL),"
        " (SELECT count(*) FROM worker_heartbeats)"
    )
    return moved == 0 and beats == 0


def run_slot(db, slot: str, intents: int = 0):
    return run_dispatch(db, fanout_settings(), channels={"email": Slow(0.001)}, estimator=warm(0.001),
                        tasks=Recorded(), invocation=Invocation.fanned_out(slot))  # fmt: skip


@pytest.mark.parametrize(
    "slot, was",
    [
        ("parent/made-up", "unknown"),  # forged
        ("parent/running", "claimed"),  # replayed while its invocation runs
        ("parent/lapsed", "expired"),  # its reservation ran out before the task came
    ],
)
def test_a_slot_that_is_not_there_to_claim_runs_nothing_and_frees_nothing(db, slot, was):
    seed_intents(db, 20)
    reserve(db, "parent/running", claimed_by="parent:host:1:abcd")
    reserve(db, "parent/lapsed", until="-1 second")
    with pytest.raises(SlotNotClaimed) as refused:
        run_slot(db, slot)
    assert refused.value.was == was and untouched(db)
    assert sorted(r[0] for r in db.run("SELECT slot FROM dispatch_invocations")) == ["parent/lapsed", "parent/running"]


def test_a_slot_runs_once_and_a_replay_after_its_end_runs_nothing(db):
    seed_intents(db, 20)
    reserve(db, "parent/1")
    assert run_slot(db, "parent/1").accepted == 20
    assert db.run("SELECT count(*) FROM dispatch_invocations") == [[0]]  # freed at its end
    seed_intents(db, 5)
    with pytest.raises(SlotNotClaimed) as replayed:
        run_slot(db, "parent/1")
    assert replayed.value.was == "unknown"
    assert db.run("SELECT count(*) FROM delivery_intents WHERE status = 'ready'") == [[5]]


def test_two_deliveries_of_one_task_at_once_run_it_once(db, database_url):
    """Cloud Tasks delivers at least once: both deliveries race for the slot; one claims it."""
    seed_intents(db, 200)
    reserve(db, "parent/twice")
    outcomes: list[object] = []

    def deliver_task() -> None:
        conn = Database.from_url(database_url)
        try:
            outcomes.append(run_slot(conn, "parent/twice"))
        except SlotNotClaimed as refused:
            outcomes.append(refused.was)
        finally:
            conn.close()

    threads = [threading.Thread(target=deliver_task) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    reports = [o for o in outcomes if not isinstance(o, str)]
    refusals = [o for o in outcomes if isinstance(o, str)]
    assert len(reports) == 1 and refusals in (["claimed"], ["unknown"])  # unknown: the winner had ended
    assert reports[0].accepted == 200


# -- through the dispatch target ----------------------------------------------------------------------
def test_the_target_answers_a_forged_slot_with_a_2xx_problem_and_runs_nothing(app_client, service_env, db):
    seed_intents(db, 3)
    answer = app_client("dispatch").post("/", json={"fanout": {"slot": "parent/forged"}})
    assert answer.status_code == 200 and answer.mimetype == "application/problem+json"  # 2xx: never retried
    body = answer.get_json()
    assert body["type"].endswith("/fanout-slot-not-claimed") and body["slot_was"] == "unknown"
    assert "claimed" not in body  # not a dispatch report
    assert untouched(db)


@pytest.fixture
def production_fanout(service_env, monkeypatch):
    for name, value in {
        "ENVIRONMENT": "production",
        "SMS_ALLOWED_COUNTRIES": "US",
        "DISPATCH_IDLE_WAIT": "0",
        "ALLOWED_INVOKERS": SCHEDULER,
        "DISPATCH_FANOUT_URL": "https://dispatch.example.run.app/",
        "DISPATCH_FANOUT_QUEUE": "projects/p/locations/europe-west1/queues/verify-dispatch-fanout",
        "DISPATCH_FANOUT_SERVICE_ACCOUNT": FANOUT_IDENTITY,
    }.items():
        monkeypatch.setenv(name, value)
    runtime.reset()
    return monkeypatch


def test_each_dispatch_path_accepts_its_own_identity_only(app_client, db, production_fanout):
    dispatch = app_client("dispatch")
    scheduler, fanout = (
        {"Authorization": cloud_run_identity(SCHEDULER)},
        {"Authorization": cloud_run_identity(FANOUT_IDENTITY)},
    )
    task = {"fanout": {"slot": "parent/1"}}
    reserve(db, "parent/1")
    refused = [dispatch.post("/", headers=fanout), dispatch.post("/", json={}, headers=fanout),
               dispatch.post("/", json=task, headers=scheduler)]  # fmt: skip
    assert [r.status_code for r in refused] == [401, 401, 401]
    assert all(r.get_json()["type"].endswith("/unauthenticated") for r in refused)
    assert db.run("SELECT claimed_by FROM dispatch_invocations") == [[None]] and untouched(db)
    ran = dispatch.post("/", json=task, headers=fanout)
    assert ran.status_code == 200 and ran.mimetype == "application/json" and ran.get_json()["claimed"] == 0
    assert dispatch.post("/", headers=scheduler).status_code == 200


def test_production_refuses_to_start_dispatch_with_interchangeable_identities():
    base = {
        "ENVIRONMENT": "production",
        "FUNCTION_TARGET": "dispatch",
        "TOKEN_KEYS": TEST_TOKEN_KEYS,
        "DISPATCH_FANOUT_URL": "https://dispatch.example.run.app/",
        "DISPATCH_FANOUT_QUEUE": "projects/p/locations/r/queues/q",
        "DISPATCH_FANOUT_SERVICE_ACCOUNT": FANOUT_IDENTITY,
    }
    with pytest.raises(ConfigError, match="ALLOWED_INVOKERS must name the scheduler"):
        load(base)
    with pytest.raises(ConfigError, match="must not name DISPATCH_FANOUT_SERVICE_ACCOUNT"):
        load({**base, "ALLOWED_INVOKERS": f"{SCHEDULER},{FANOUT_IDENTITY.upper()}"})
    assert load({**base, "ALLOWED_INVOKERS": SCHEDULER}).auth.allowed_invokers == {SCHEDULER}
