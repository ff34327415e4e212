"""The idle wait: while the outbox is empty an invocation asks one cheap question per poll
(outbox/queries/idle.sql:idle_probe: one probe of the eligible index, no claim, no row locks), at a fixed rate,
and new work is claimed within about one poll interval of its commit."""

from __future__ import annotations

import threading
import time

from signup_verification.delivery.batch_sizing import LatencyEstimator
from signup_verification.delivery.channels.base import SendResult
from signup_verification.outbox import idle
from signup_verification.platform.database import Database
from support.dispatch import provider_settings, run_dispatch
from support.fakes.seed import seed_intents
from support.waiting import until

POLL = 0.25
# Scheduling slack on a shared 2-core test machine: a sleep may wake late, a probe may wait for a core.
SLACK = 0.45


class Instant:
    transport = "test"

    def send(self, message, deadline: float) -> SendResult:
        return SendResult.accepted()

    def close(self) -> None:
        pass


class StatementLog(Database):
    """Records (monotonic time, first line of SQL) for each statement."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.log: list[tuple[float, str]] = []

    def run(self, sql, **params):
        self.log.append((time.monotonic(), sql))
        return super().run(sql, **params)


def _estimator() -> LatencyEstimator:
    estimator = LatencyEstimator()
    estimator.seed({"email": 0.0, "sms": 0.0})
    return estimator


def _idle_waiter(db) -> str | None:
    """The invocation registered as the deployment's idle waiter (outbox/idle_enter.sql), if any."""
    rows = db.run("SELECT watermark ->> 'idle_owner' FROM worker_heartbeats WHERE watermark ? 'idle_owner'")
    return rows[0][0] if rows else None


def _settings(tmp_path, timeout: int):
    return provider_settings(
        local_dir=tmp_path,
        dispatch_idle_wait=True,
        dispatch_idle_poll_seconds=POLL,
        function_timeout_seconds=timeout,
        dispatch_safety_margin_seconds=1.0,
    )


def test_an_idle_wait_probes_once_per_poll_and_claims_nothing(database_url, tmp_path):
    db = StatementLog.from_url(database_url)
    try:
        stop = threading.Event()
        threading.Timer(2.6, stop.set).start()
        run_dispatch(
            db,
            _settings(tmp_path, 30),
            channels={"email": Instant(), "sms": Instant()},
            estimator=_estimator(),
            stop=stop,
        )
    finally:
        db.close()
    kinds = ["probe" if sql is idle._PROBE else "other" for _, sql in db.log]
    first, last = kinds.index("probe"), len(kinds) - 1 - kinds[::-1].index("probe")
    assert set(kinds[first : last + 1]) == {"probe"}  # while idle: nothing but the probe (no claim, no lock)
    probes = [t for (t, _), kind in zip(db.log, kinds, strict=True) if kind == "probe"]
    assert 8 <= len(probes) <= 11, len(probes)  # ~2.5 s at 4 a second, not more
    gaps = [b - a for a, b in zip(probes, probes[1:], strict=False)]
    assert min(gaps) >= POLL * 0.8, gaps  # a fixed rate: no burst of probes


def test_work_committed_during_an_idle_wait_is_claimed_within_a_poll(db, database_url, tmp_path):
    def create_some() -> None:
        other = Database.from_url(database_url)
        try:
            for i, pause in enumerate((0.7, 0.33, 0.61, 0.47, 0.9)):
                time.sleep(pause)
                seed_intents(other, 1, prefix=f"late{i}")
        finally:
            other.close()

    creator = threading.Thread(target=create_some)
    creator.start()
    report = run_dispatch(
        db, _settings(tmp_path, 6), channels={"email": Instant(), "sms": Instant()}, estimator=_estimator()
    )
    creator.join()
    assert report.accepted == 5
    waits = [
        float(r[0]) for r in db.run("SELECT extract(epoch FROM last_claimed_at - created_at) FROM delivery_intents")
    ]
    assert max(waits) <= POLL + SLACK, waits


def test_the_probe_answers_what_the_claim_would_take(db):
    assert idle.work_waiting(db) is False  # empty outbox
    [email] = seed_intents(db, 1, prefix="mail")
    assert idle.work_waiting(db) is True
    db.run("UPDATE delivery_intents SET next_attempt_at = now() + interval '1 minute' WHERE id = :id", id=email)
    assert idle.work_waiting(db) is False  # a retry not yet due wakes nobody
    seed_intents(db, 1, sms_every=1, prefix="text")
    assert idle.work_waiting(db, sms_max_per_hour=None) is True
    assert idle.work_waiting(db, sms_max_per_hour=0) is False  # past the SMS budget the claim would take none
    assert idle.work_waiting(db, sms_max_per_hour=5) is True


def test_a_newer_waiting_invocation_takes_over_and_the_older_returns(db, database_url, tmp_path):
    """Invocations may outlive the scheduler's minute (timeout over 60 s): the older one leaves as
    soon as the newer one waits, so there is always one waiter and never two for long."""
    settings = _settings(tmp_path, 30)
    ended: dict[str, float] = {}

    def invocation(label: str) -> None:
        own = Database.from_url(database_url)
        try:
            run_dispatch(own, settings, channels={"email": Instant(), "sms": Instant()}, estimator=_estimator())
        finally:
            own.close()
        ended[label] = time.monotonic()

    older = threading.Thread(target=invocation, args=("older",))
    older.start()
    until(lambda: _idle_waiter(db), what="the older invocation waiting")
    newer_started = time.monotonic()
    stop = threading.Event()

    def newer_invocation() -> None:  # its own connection: the test's `db` is read meanwhile
        own = Database.from_url(database_url)
        try:
            run_dispatch(
                own, settings, channels={"email": Instant(), "sms": Instant()}, estimator=_estimator(), stop=stop
            )
        finally:
            own.close()

    newer = threading.Thread(target=newer_invocation)
    newer.start()
    older.join(20)
    # Handed over within a few polls of the newer one waiting (its start takes a few statements; on a
    # loaded 2-core machine up to seconds), not at the older one's own deadline ~27 s later.
    assert "older" in ended and ended["older"] - newer_started < 6.0
    seed_intents(db, 1, prefix="after")  # the newer one still waits, and sends it
    accepted = "SELECT count(*) FROM delivery_intents WHERE status = 'accepted'"
    until(lambda: db.run(accepted)[0][0], timeout=5, what="the newer invocation sending")
    stop.set()
    newer.join(10)
    assert db.run("SELECT count(*) FROM delivery_intents WHERE status = 'accepted'")[0][0] == 1


def test_the_newest_start_wins_whatever_order_they_register_in(db):
    idle.enter(db, "dispatch:t", "t", "newer", elapsed_seconds=1.0)
    idle.enter(db, "dispatch:t", "t", "older", elapsed_seconds=30.0)  # started earlier, registers later
    assert idle.probe(db, "dispatch:t", "newer").superseded is False
    assert idle.probe(db, "dispatch:t", "older").superseded is True
    assert idle.probe(db, "dispatch:other", "anyone").superseded is False  # no waiter recorded: keep waiting
