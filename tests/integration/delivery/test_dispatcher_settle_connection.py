"""DISPATCH_SETTLE_CONNECTION: each batch's settle runs on a second connection while the next batch
is claimed. Every outcome is still recorded once, fenced, with its attempt row; counts are exact."""

from __future__ import annotations

import time

from signup_verification.delivery.budget import LatencyEstimator
from signup_verification.delivery.channels.base import SendResult
from support.dispatch import provider_settings, run_dispatch
from support.fakes.seed import seed_intents


class Scripted:
    """Accepts, except every 7th intent's destination fails transiently (retried by a later invocation)."""

    transport = "test"

    def send(self, message, deadline: float) -> SendResult:
        if message.to.startswith("seed-user") and message.to.split("@")[0].endswith("7"):
            return SendResult.retryable("http_503", "provider busy", retry_after=3600)
        return SendResult.accepted()

    def close(self) -> None:
        pass


def _estimator() -> LatencyEstimator:
    estimator = LatencyEstimator()
    estimator.seed({"email": 0.0, "sms": 0.0})
    return estimator


def test_settles_on_a_second_connection_record_every_outcome_once(db, tmp_path):
    seed_intents(db, 250)
    settings = provider_settings(local_dir=tmp_path, dispatch_max_batch=40, dispatch_settle_connection=True)
    report = run_dispatch(db, settings, channels={"email": Scripted(), "sms": Scripted()}, estimator=_estimator())
    failing = db.run("SELECT count(*) FROM verifications WHERE destination LIKE '%7@example.com'")[0][0]
    assert report.batches >= 6
    assert (report.accepted, report.retryable, report.stale_writes) == (250 - failing, failing, 0)
    by_status = dict(db.run("SELECT status, count(*) FROM delivery_intents GROUP BY status"))
    assert by_status == {"accepted": 250 - failing, "retryable": failing}
    # two attempt rows per intent (attempting, then its outcome), written with the state change
    assert db.run("SELECT count(*), count(DISTINCT attempt_id) FROM delivery_attempts")[0] == [500, 250]
    assert db.run("SELECT count(*) FROM delivery_intents WHERE lease_owner IS NOT NULL")[0][0] == 0
    # the settle connection is closed when the invocation ends (its backend exits asynchronously)
    for _ in range(50):
        if db.run("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")[0][0] == 1:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the settle connection is still open")
