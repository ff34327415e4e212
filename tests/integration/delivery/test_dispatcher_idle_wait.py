"""DISPATCH_IDLE_WAIT: an invocation that finds the outbox empty keeps polling it until near its
deadline, sends what arrives meanwhile, and still returns inside its budget; off, it returns at once."""

from __future__ import annotations

import threading
import time

import pytest

from signup_verification.config import ConfigError, load
from signup_verification.delivery.batch_sizing import LatencyEstimator, invocation_seconds
from signup_verification.delivery.channels.base import SendResult
from signup_verification.local.scheduler import _next_tick
from signup_verification.platform.database import Database
from support.dispatch import provider_settings, run_dispatch
from support.fakes.seed import seed_intents


class Instant:
    """A zero-latency provider that accepts everything."""

    transport = "test"

    def send(self, message, deadline: float) -> SendResult:
        return SendResult.accepted()

    def close(self) -> None:
        pass


def _channels():
    return {"email": Instant(), "sms": Instant()}


def _estimator() -> LatencyEstimator:
    estimator = LatencyEstimator()
    estimator.seed({"email": 0.0, "sms": 0.0})
    return estimator


def test_idle_invocation_sends_work_created_while_it_waits_and_returns_within_budget(db, database_url, tmp_path):
    settings = provider_settings(
        local_dir=tmp_path,
        dispatch_idle_wait=True,
        dispatch_idle_poll_seconds=0.1,
        function_timeout_seconds=6,
        dispatch_safety_margin_seconds=1.0,
    )
    budget = invocation_seconds(6, 1.0)

    def create_later() -> None:
        time.sleep(1.0)
        other = Database.from_url(database_url)
        seed_intents(other, 3, prefix="late")
        other.close()

    creator = threading.Thread(target=create_later)
    creator.start()
    started = time.monotonic()
    report = run_dispatch(db, settings, channels=_channels(), estimator=_estimator())
    elapsed = time.monotonic() - started
    creator.join()
    assert report.accepted == 3
    assert 3.0 < elapsed <= budget + 0.5, elapsed  # kept waiting after the work, returned before the deadline
    late = db.run(
        "SELECT count(*) FROM delivery_attempts a JOIN delivery_intents i ON i.id = a.intent_id "
        "WHERE a.outcome = 'accepted' AND a.observed_at - i.created_at < interval '1.5 seconds'"
    )[0][0]
    assert late == 3  # sent within about a poll interval of being created, not at the next invocation


def test_without_idle_wait_an_empty_outbox_ends_the_invocation(db, tmp_path):
    settings = provider_settings(local_dir=tmp_path, dispatch_idle_wait=False, function_timeout_seconds=30)
    started = time.monotonic()
    report = run_dispatch(db, settings, channels=_channels(), estimator=_estimator())
    assert report.claimed == 0 and time.monotonic() - started < 2.0


def test_shutdown_ends_an_idle_wait_promptly(db, tmp_path):
    settings = provider_settings(
        local_dir=tmp_path, dispatch_idle_wait=True, dispatch_idle_poll_seconds=0.1, function_timeout_seconds=30
    )
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    started = time.monotonic()
    run_dispatch(db, settings, channels=_channels(), estimator=_estimator(), stop=stop)
    assert time.monotonic() - started < 2.0


def test_idle_wait_defaults_on_in_production_only():
    assert load({"ENVIRONMENT": "production"}).dispatch.idle_wait is True
    assert load({"ENVIRONMENT": "local"}).dispatch.idle_wait is False
    assert load({"ENVIRONMENT": "local", "DISPATCH_IDLE_WAIT": "true"}).dispatch.idle_wait is True
    env = {"DISPATCH_IDLE_WAIT": "off", "DISPATCH_IDLE_POLL_SECONDS": "0.5"}
    assert load(env).dispatch.idle_wait is False
    assert load(env).dispatch.idle_poll_seconds == 0.5
    with pytest.raises(ConfigError):
        load({"DISPATCH_IDLE_WAIT": "maybe"})


def test_scheduler_ticks_at_a_fixed_rate_like_cron():
    assert _next_tick(100.0, 60.0, 130.0) == 160.0  # a short call: the next minute's tick
    assert _next_tick(100.0, 60.0, 157.0) == 160.0  # a call that idled until near the tick
    assert _next_tick(100.0, 60.0, 165.0) == 220.0  # an overrun: the missed tick is not replayed
