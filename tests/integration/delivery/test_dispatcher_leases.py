"""The delivery worker's leases and time: fencing after a takeover, SIGTERM at each point of a batch,
the invocation's time budget and lease renewal. A real PostgreSQL and the providers' local stand-ins."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest

from signup_verification.delivery import batch_sizing as budget
from signup_verification.delivery.batch_sizing import LatencyEstimator
from signup_verification.delivery.channels.base import SendResult
from signup_verification.operations.dispatcher import Dispatcher
from signup_verification.outbox import transitions as t
from signup_verification.outbox.config import RetryPolicy
from signup_verification.platform.channels import MESSAGE_CHANNELS
from signup_verification.platform.database import Database
from support.dispatch import attempts, intent, provider_settings, run_dispatch
from support.fakes.seed import seed_intents


# -- fencing ---------------------------------------------------------------------------------------------
class TakeoverChannel:
    """Accepts every message, but while the first send is in flight the lease is lost and another
    worker takes the intent over (expired lease -> reconciler -> retry -> new claim)."""

    channel, transport = "email", "takeover"

    def __init__(self, database_url: str):
        self.database_url = database_url
        self.sent = []

    def send(self, message, deadline):
        self.sent.append(message.intent_id)
        other = Database.from_url(self.database_url)
        try:
            other.run(
                "UPDATE delivery_intents SET lease_until = now() - interval '1 second' WHERE id = :id",
                id=message.intent_id,
            )
            t.lose_leases(other, RetryPolicy(), 10)
            other.run("UPDATE delivery_intents SET next_attempt_at = now() WHERE id = :id", id=message.intent_id)
            t.resolve_ambiguous(other, RetryPolicy(), 10)
            assert [c.id for c in t.claim(other, "the-new-owner", 10, 60)] == [message.intent_id]
        finally:
            other.close()
        return SendResult.accepted("late")

    def close(self):
        pass


def test_a_worker_whose_lease_was_taken_over_cannot_settle(db, database_url):
    seed_intents(db, 1)
    settings = provider_settings(send_concurrency=1)
    report = run_dispatch(db, settings, channels={"email": TakeoverChannel(database_url)})
    assert (report.claimed, report.accepted, report.stale_writes) == (1, 0, 1)
    row = intent(db, 1)
    assert (row["status"], row["lease_owner"], row["lease_version"]) == ("claimed", "the-new-owner", 2)
    assert row["provider_ref"] is None  # the late 'accepted' changed nothing
    assert [a[1:] for a in attempts(db, 1)] == [("attempting", None), ("ambiguous", "lease_lost")]


# -- shutdown ----------------------------------------------------------------------------------------------
class StopAfterClaim(Dispatcher):
    def _record_claim(self):
        super()._record_claim()
        self.stop.set()  # SIGTERM lands right after the claim committed


def test_sigterm_after_claim_releases_unstarted_work(db, smtp):
    seed_intents(db, 5)
    report = run_dispatch(
        db, provider_settings(smtp, send_concurrency=8), dispatcher_class=StopAfterClaim, stop=threading.Event()
    )
    assert (report.claimed, report.released, report.accepted) == (5, 5, 0)
    # The fused claim had begun them: each attempt ends 'released', is not charged (max_attempts
    # grows with the used number) and the intent is eligible again at once.
    rows = db.rows(
        "SELECT status, attempts, max_attempts, lease_owner, next_attempt_at <= now() AS due FROM delivery_intents"
    )
    assert rows and all(
        r == {"status": "retryable", "attempts": 1, "max_attempts": 6, "lease_owner": None, "due": True} for r in rows
    )
    outcomes = db.run("SELECT outcome, count(*) FROM delivery_attempts GROUP BY outcome ORDER BY outcome")
    assert outcomes == [["attempting", 5], ["released", 5]] and smtp.received == []
    assert sorted(c.id for c in t.claim(db, "next", 10, 30)) == sorted(
        r[0] for r in db.run("SELECT id FROM delivery_intents")
    )


def test_sigterm_before_start_claims_nothing(db, smtp):
    seed_intents(db, 2)
    stop = threading.Event()
    stop.set()
    assert run_dispatch(db, provider_settings(smtp), stop=stop).claimed == 0


def test_sigterm_lets_in_flight_sends_finish_and_starts_no_new_ones(db, twilio):
    twilio.default_delay = 0.5
    seed_intents(db, 6, sms_every=1)
    settings = provider_settings(twilio=twilio, send_concurrency=2, dispatch_batch_seconds=30)
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    started = time.monotonic()
    report = run_dispatch(db, settings, stop=stop)
    assert time.monotonic() - started < 1.5
    assert (report.claimed, report.accepted, report.retryable, report.batches) == (6, 2, 4, 1)
    assert twilio.requests == 2
    rows = db.rows(
        "SELECT status, extract(epoch FROM next_attempt_at - now()) AS wait, last_error "
        "FROM delivery_intents WHERE status = 'retryable'"
    )
    assert len(rows) == 4 and all(r["wait"] <= 0.5 and r["last_error"].startswith("not_sent") for r in rows)
    assert len(t.claim(db, "next-worker", 10, 30)) == 4  # eligible again at once


# -- budget --------------------------------------------------------------------------------------------------
def test_a_provider_slower_than_measured_cannot_overrun_the_budget(db, twilio):
    twilio.default_delay = 1.5  # the estimate says 20 ms: the whole batch is sized for that
    seed_intents(db, 40, sms_every=1)
    settings = provider_settings(
        twilio=twilio, dispatch_safety_margin_seconds=0.5, send_concurrency=2, send_timeout_seconds=10
    )
    # below FUNCTION_TIMEOUT_SECONDS' floor of 5, which a deployment may not set but this test needs
    settings = replace(settings, dispatch=replace(settings.dispatch, function_timeout_seconds=2))
    estimator = LatencyEstimator()
    estimator.seed({"sms": 0.02, "email": 0.02})
    started = time.monotonic()
    report = run_dispatch(db, settings, estimator=estimator)
    elapsed = time.monotonic() - started
    assert elapsed < 2.0 and report.elapsed_ms < 2000  # inside FUNCTION_TIMEOUT_SECONDS, margin kept
    assert report.ambiguous == 2  # the two sends in flight were cut at the deadline
    assert report.retryable == report.claimed - 2  # the rest were never started: not_sent, eligible again
    leftover = db.run("SELECT count(*) FROM delivery_intents WHERE status IN ('claimed', 'attempting')")
    assert leftover == [[0]]


@pytest.mark.slow
def test_budget_sizes_batches_from_measured_latency(db, twilio):
    twilio.default_delay = 1.0
    seed_intents(db, 40, sms_every=1)
    settings = provider_settings(twilio=twilio, function_timeout_seconds=5, send_concurrency=2)
    report = run_dispatch(db, settings)
    assert report.elapsed_ms <= 3750  # 5 s minus the margin
    assert report.accepted == report.claimed == twilio.requests and report.ambiguous == report.retryable == 0
    assert db.run("SELECT count(*) FROM delivery_intents WHERE status = 'ready'") == [[40 - report.claimed]]


def test_leases_are_renewed_while_sends_run_long(db, twilio, monkeypatch):
    monkeypatch.setattr(budget, "MIN_LEASE_SECONDS", 0.2)  # the lease is ~1 s; each send takes 1.6 s
    twilio.default_delay = 1.6
    seed_intents(db, 2, sms_every=1)
    estimator = LatencyEstimator()
    estimator.seed(dict.fromkeys(MESSAGE_CHANNELS, 0.01))  # every channel measured fast: a lease of ~1 s
    renewals = []
    real_renew = t.renew
    monkeypatch.setattr(t, "renew", lambda *a, **k: renewals.append(real_renew(*a, **k)) or renewals[-1])
    settings = provider_settings(twilio=twilio, send_timeout_seconds=5, dispatch_max_batch=2)
    report = run_dispatch(db, settings, estimator=estimator)
    assert (report.accepted, report.stale_writes) == (2, 0)
    assert renewals and all(len(r) == 2 for r in renewals)


# -- round trips ----------------------------------------------------------------------------------------------
