"""The fan-out: the scheduled invocation starts more when its backlog is more than it can send soon
enough, within DISPATCH_MAX_PARALLEL live at once (reserved under a lock), and each started one
takes its slot, claims its own batches, starts none and frees the slot at its end. The seam is
filled with a recording stand-in here (tests/integration/platform/test_tasks.py has the real ones;
tests/system/test_fanout_local.py the whole local emulation)."""

from __future__ import annotations

import threading

from signup_verification.delivery.fanout import FANOUT, Invocation
from signup_verification.platform.database import Database
from support.dispatch import Recorded, Slow, fanout_settings, run_dispatch, warm
from support.fakes.seed import seed_intents
from support.waiting import until


def live_slots(db) -> list[dict]:
    return db.rows("SELECT slot, started_at, until > now() AS live FROM dispatch_invocations ORDER BY slot")


def test_a_backlog_one_invocation_cannot_drain_in_time_starts_more_within_the_bound(db):
    """4 senders at 50 ms are ~64 sends/s: 2,000 eligible email are ~30 s of work for a 1 s drain target.
    The scheduled invocation reserves and enqueues DISPATCH_MAX_PARALLEL (3), never more. (The SMS
    channel has nothing waiting: a claim full of email is full all the same.)"""
    seed_intents(db, 2000)
    tasks = Recorded()
    channels = {"email": Slow(0.05), "sms": Slow(0.05)}
    report = run_dispatch(db, fanout_settings(), channels=channels, estimator=warm(0.05), tasks=tasks)
    assert report.claimed > 0
    slots = [body["fanout"]["slot"] for body in tasks.bodies]
    assert len(slots) == 3 and len(set(slots)) == 3
    reserved = live_slots(db)
    assert sorted(r["slot"] for r in reserved) == sorted(slots) and all(r["live"] for r in reserved)
    assert all(r["started_at"] is None for r in reserved)  # enqueued, not begun (nobody ran the tasks here)


def test_a_backlog_one_invocation_sends_in_time_starts_none(db):
    seed_intents(db, 40)
    tasks = Recorded()
    report = run_dispatch(db, fanout_settings(dispatch_fanout_drain_seconds=30), channels={"email": Slow(0.05)},
                          estimator=warm(0.05), tasks=tasks)  # fmt: skip
    assert report.accepted == 40 and tasks.bodies == [] and live_slots(db) == []


def test_a_fanout_invocation_takes_its_slot_starts_none_and_frees_it_at_the_end(db, database_url):
    seed_intents(db, 200)
    db.run(
        "INSERT INTO dispatch_invocations (slot, deployment, started_by, until)"
        " VALUES ('parent/1', 'test', 'parent', now() + interval '90 seconds')"
    )
    tasks = Recorded()
    seen: list[list] = []

    def watch() -> None:  # the slot while the invocation runs: begun, until its own deadline
        other = Database.from_url(database_url)
        try:
            begun = "SELECT 1 FROM dispatch_invocations WHERE started_at IS NOT NULL"
            until(lambda: other.run(begun), what="the fan-out invocation taking its slot")
            seen.extend(
                other.run(
                    "SELECT started_at IS NOT NULL, until < now() + interval '10 seconds' FROM dispatch_invocations"
                )
            )
        finally:
            other.close()

    watcher = threading.Thread(target=watch)
    watcher.start()
    report = run_dispatch(
        db,
        fanout_settings(dispatch_idle_wait="true"),
        channels={"email": Slow(0.01)},
        estimator=warm(0.01),
        tasks=tasks,
        invocation=Invocation.fanned_out("parent/1"),
    )
    watcher.join(10)
    assert report.accepted == 200 and tasks.bodies == []  # it sent its share and started nobody
    assert seen == [[True, True]]
    assert live_slots(db) == []  # freed at its end
    assert report.elapsed_ms < 5000  # no idle wait for a fan-out invocation, though DISPATCH_IDLE_WAIT is on


def test_two_scheduled_invocations_deciding_at_once_never_exceed_the_bound(db, database_url):
    """The hand-over between the scheduler's two jobs: both see the backlog at the same moment."""
    results = []

    def reserve() -> None:
        conn = Database.from_url(database_url)
        try:
            [[slots, live]] = conn.run(
                "SELECT slots, live FROM fanout_reserve('test', 'p', 3, 4, interval '90 seconds')"
            )
            results.append((len(slots), live))
        finally:
            conn.close()

    threads = [threading.Thread(target=reserve) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sum(n for n, _ in results) == 4 and len(live_slots(db)) == 4
    assert sorted(live for _, live in results)[-1] == 4


def test_a_slot_whose_invocation_never_came_stops_counting_at_its_deadline(db):
    db.run(
        "INSERT INTO dispatch_invocations (slot, deployment, started_by, until) VALUES"
        " ('dead/1', 'test', 'dead', now() - interval '1 second'), ('live/1', 'test', 'live', now() + interval '1 minute')"
    )
    [[slots, live]] = db.run("SELECT slots, live FROM fanout_reserve('test', 'p', 5, 2, interval '90 seconds')")
    assert len(slots) == 1 and live == 2
    assert {r["slot"] for r in live_slots(db)} == {"live/1", *slots}  # the dead slot was removed


def test_the_dispatch_target_tells_a_fanout_task_from_a_scheduler_tick(app_client, service_env, db):
    client = app_client("dispatch")
    seed_intents(db, 2)
    assert client.post("/", json={}).status_code == 200
    answer = client.post("/", json={"fanout": {"slot": "parent/unknown"}})  # test_fanout_claims.py: runs nothing
    assert answer.status_code == 200 and answer.get_json()["slot_was"] == "unknown"
    for bad in ({"fanout": {"slot": ""}}, {"fanout": "x"}, {"fanout": {"slot": "x" * 201}}, [1]):
        refused = client.post("/", json=bad)
        assert refused.status_code == 400 and refused.mimetype == "application/problem+json", bad
    refused = client.post("/", data=b"{not json", content_type="application/json")
    assert refused.status_code == 400 and "traceback" not in refused.get_data(as_text=True).lower()
    assert FANOUT == "fanout"
