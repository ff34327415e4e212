"""Create nudges dispatch (outbox/nudge.py): a committed create enqueues at most one named task per
time bucket, scheduled at the bucket's end, through the platform seam; creates that wrote nothing
new send none. The dispatch target's nudge path drains like a scheduled tick, accepts only the
nudge identity in production, and on an empty outbox answers after one probe having written nothing.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from google.oauth2.credentials import Credentials

from signup_verification import runtime
from signup_verification.config import load
from signup_verification.delivery.fanout import Invocation
from signup_verification.operations import dispatch_run
from signup_verification.outbox import nudge
from signup_verification.outbox.config import NudgeConfig
from signup_verification.platform.errors import ConfigError
from signup_verification.platform.tasks import CloudTasks
from support.auth import cloud_run_identity
from support.dispatch import KEYRING, Slow, provider_settings
from support.fakes.cloud_tasks import TasksApi
from support.fakes.seed import seed_intents
from support.paths import TEST_TOKEN_KEYS

SCHEDULER = "verify-scheduler@p.iam.gserviceaccount.com"
NUDGE_IDENTITY = "verify-nudge@p.iam.gserviceaccount.com"
QUEUE = "projects/p/locations/europe-west1/queues/verify-dispatch-nudge"
TARGET = "https://verify-dispatch-1.europe-west1.run.app/"


class Recorded:
    """The seam, recording what it was asked to enqueue."""

    def __init__(self) -> None:
        self.enqueued: list[tuple[dict, str, float]] = []

    def enqueue(self, body: bytes, name: str, at: float) -> None:
        self.enqueued.append((json.loads(body), name, at))

    def start(self, bodies) -> None:
        raise AssertionError("a nudge never starts anonymous tasks")


def test_one_task_per_bucket_named_by_it_and_scheduled_at_its_end():
    now = [1000.25]
    seam = Recorded()
    nudger = nudge.Nudger(seam, 0.5, clock=lambda: now[0])
    asked = [nudger.nudge(), nudger.nudge()]  # a second create in the same bucket asks nothing
    now[0] = 1000.6
    asked.append(nudger.nudge())
    assert asked == [True, False, True]
    assert [(body, at) for body, _, at in seam.enqueued] == [({"nudge": {"bucket": 2000}}, 1000.5),
                                                             ({"nudge": {"bucket": 2001}}, 1001.0)]  # fmt: skip
    names = [name for _, name, _ in seam.enqueued]
    assert names == [nudge.task_name(2000), nudge.task_name(2001)] and len(set(names)) == 2
    assert names[0].startswith("nudge-") and names[0].endswith("-2000") and names[0] != names[1][:-4] + "2000"


class Answered(CloudTasks):
    """The Cloud Tasks client, creating in the caller's thread and keeping what each create answered."""

    answers: list[bool] = []

    def enqueue(self, body: bytes, name: str, at: float) -> None:
        self.answers.append(self.create_named(body, name, at))


def test_concurrent_creates_on_many_instances_make_one_task_per_bucket(caplog):
    """Each instance asks Cloud Tasks once per bucket; the API refuses every name but the first
    (409 ALREADY_EXISTS), which is no failure and nothing logged."""
    with TasksApi() as api:
        instances = [
            nudge.Nudger(Answered(QUEUE, TARGET, NUDGE_IDENTITY, 1800, api=api.url, credentials=Credentials("t")), 3600)
            for _ in range(4)
        ]

        def create_on(instance: nudge.Nudger) -> None:
            for _ in range(5):  # five creates on each instance
                instance.nudge()

        threads = [threading.Thread(target=create_on, args=(i,)) for i in instances]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
    assert sorted(Answered.answers) == [False, False, False, True]  # four asked, one task
    [task] = api.tasks.values()
    bucket = nudge.bucket_of(time.time(), 3600)
    assert task["name"] in {f"{QUEUE}/tasks/{nudge.task_name(b)}" for b in (bucket - 1, bucket)}
    assert task["httpRequest"]["oidcToken"] == {"serviceAccountEmail": NUDGE_IDENTITY, "audience": TARGET}
    assert len(api.refused) == 3 and not [r for r in caplog.records if "nudge" in r.getMessage()]


def test_a_created_verification_nudges_and_a_create_that_wrote_nothing_does_not(configured_app, monkeypatch):
    seam = Recorded()
    monkeypatch.setattr(nudge, "nudger", lambda config: nudge.Nudger(seam, 0.001) if config.enabled else None)
    create = configured_app("create_verification", DISPATCH_NUDGE_URL="http://127.0.0.1:9/", RATE_LIMIT_PER_HOUR="1")
    body = {"account_id": "acct", "channel": "email", "destination": "ada@example.com"}
    assert create.post("/", json=body, headers={"Idempotency-Key": "k-1"}).status_code == 201
    assert len(seam.enqueued) == 1
    replayed = create.post("/", json=body, headers={"Idempotency-Key": "k-1"})  # nothing new to send
    limited = create.post("/", json=body, headers={"Idempotency-Key": "k-2"})  # refused: rolled back
    mismatch = create.post("/", json={**body, "account_id": "b"}, headers={"Idempotency-Key": "k-1"})
    assert [replayed.status_code, limited.status_code, mismatch.status_code] == [201, 429, 422]
    assert len(seam.enqueued) == 1


def test_without_a_nudge_url_create_nudges_nothing():
    assert nudge.nudger(NudgeConfig()) is None


def test_a_nudged_invocation_on_an_empty_outbox_probes_once_and_writes_nothing(db):
    report = run_nudged(db)
    assert report.claimed == 0 and report.batches == 0
    assert db.run("SELECT count(*) FROM worker_heartbeats") == [[0]]


def test_a_nudged_invocation_drains_the_outbox_and_returns(db):
    seed_intents(db, 30)
    report = run_nudged(db)
    assert report.accepted == 30
    assert db.run("SELECT count(*) FROM delivery_intents WHERE status <> 'accepted'") == [[0]]
    assert report.elapsed_ms < 5_000  # never waits idle, even with DISPATCH_IDLE_WAIT on


def run_nudged(db):
    config = provider_settings(dispatch_idle_wait=True, function_timeout_seconds=20)
    return dispatch_run.run(db, config.dispatch, config.retry, config.signals, KEYRING, {"email": Slow(0.001)},
                            stop=threading.Event(), close_channels=lambda: None, invocation=Invocation.nudged())  # fmt: skip


@pytest.fixture
def production_nudge(service_env, monkeypatch):
    for name, value in {
        "ENVIRONMENT": "production",
        "SMS_ALLOWED_COUNTRIES": "US",
        "DISPATCH_IDLE_WAIT": "0",
        "ALLOWED_INVOKERS": SCHEDULER,
        "DISPATCH_NUDGE_URL": TARGET,
        "DISPATCH_NUDGE_QUEUE": QUEUE,
        "DISPATCH_NUDGE_SERVICE_ACCOUNT": NUDGE_IDENTITY,
    }.items():
        monkeypatch.setenv(name, value)
    runtime.reset()
    return monkeypatch


def test_the_nudge_path_accepts_the_nudge_identity_only(app_client, db, production_nudge):
    dispatch = app_client("dispatch")
    scheduler, nudger = ({"Authorization": cloud_run_identity(SCHEDULER)},
                         {"Authorization": cloud_run_identity(NUDGE_IDENTITY)})  # fmt: skip
    seed_intents(db, 2)
    task = {"nudge": {"bucket": 1}}
    refused = [dispatch.post("/", json=task, headers=scheduler), dispatch.post("/", json={}, headers=nudger)]
    assert [r.status_code for r in refused] == [401, 401]
    assert db.run("SELECT count(*) FROM delivery_intents WHERE status = 'ready'") == [[2]]
    ran = dispatch.post("/", json=task, headers=nudger)
    assert ran.status_code == 200 and ran.get_json()["claimed"] == 2
    assert dispatch.post("/", json={"nudge": "x"}, headers=nudger).status_code == 400


def test_production_refuses_a_nudge_identity_the_scheduled_path_or_the_fanout_shares():
    base = {
        "ENVIRONMENT": "production",
        "FUNCTION_TARGET": "dispatch",
        "TOKEN_KEYS": TEST_TOKEN_KEYS,
        "DISPATCH_NUDGE_URL": TARGET,
        "DISPATCH_NUDGE_QUEUE": QUEUE,
        "DISPATCH_NUDGE_SERVICE_ACCOUNT": NUDGE_IDENTITY,
    }
    with pytest.raises(ConfigError, match="ALLOWED_INVOKERS must name the scheduler"):
        load(base)
    with pytest.raises(ConfigError, match="must not name DISPATCH_NUDGE_SERVICE_ACCOUNT"):
        load({**base, "ALLOWED_INVOKERS": f"{SCHEDULER},{NUDGE_IDENTITY}"})
    shared = {**base, "ALLOWED_INVOKERS": SCHEDULER, "DISPATCH_FANOUT_URL": TARGET,
              "DISPATCH_FANOUT_QUEUE": QUEUE.replace("nudge", "fanout"), "DISPATCH_FANOUT_SERVICE_ACCOUNT": NUDGE_IDENTITY}  # fmt: skip
    with pytest.raises(ConfigError, match="must be different identities"):
        load(shared)
    assert load({**base, "ALLOWED_INVOKERS": SCHEDULER}).dispatch.nudge.service_account == NUDGE_IDENTITY
    # the dispatch target as infra configures it: the identity it accepts, nothing to nudge with
    alone = {k: v for k, v in base.items() if not k.startswith("DISPATCH_NUDGE_")}
    nudged = load({**alone, "ALLOWED_INVOKERS": SCHEDULER, "DISPATCH_NUDGE_SERVICE_ACCOUNT": NUDGE_IDENTITY})
    assert nudged.dispatch.nudge.service_account == NUDGE_IDENTITY and not nudged.dispatch.nudge.enabled
    with pytest.raises(ConfigError, match="DISPATCH_NUDGE_URL must go through DISPATCH_NUDGE_QUEUE"):
        load({**base, "FUNCTION_TARGET": "create_verification", "DISPATCH_NUDGE_QUEUE": "",
              "DISPATCH_NUDGE_SERVICE_ACCOUNT": ""})  # fmt: skip
