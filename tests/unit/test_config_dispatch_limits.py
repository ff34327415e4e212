"""The dispatcher's sends in flight, provider limits and fan-out, as config.load reads them."""

from __future__ import annotations

import pytest

from signup_verification.config import ConfigError, load

QUEUE = "projects/p-1/locations/europe-west1/queues/verify-dispatch-fanout"


def _in_flight(env: dict[str, str]) -> list[int]:
    dispatch = load(env).dispatch
    return [dispatch.concurrency(c) for c in ("email", "sms", "webhook")]


def test_sends_in_flight_per_channel_one_setting_for_all_and_each_channel_its_own():
    assert _in_flight({}) == [128, 32, 32]
    assert _in_flight({"SEND_CONCURRENCY": "4"}) == [4, 4, 4]
    assert _in_flight({"SEND_CONCURRENCY": "4", "SEND_CONCURRENCY_MAX_EMAIL": "200"}) == [200, 4, 4]
    # each channel's HTTP pool holds a connection per sender of that channel
    channels = load({"SEND_CONCURRENCY_MAX_SMS": "300"}).channels
    assert (channels.pool_size("sms"), channels.pool_size("email")) == (300, 128)


def test_a_bad_value_for_every_channel_is_one_problem_named_as_set():
    with pytest.raises(ConfigError) as caught:
        load({"SEND_CONCURRENCY": "0"})
    assert caught.value.problems == ("SEND_CONCURRENCY must be >= 1, got 0",)


def test_provider_limits_default_to_the_documented_ones_and_twilio_by_the_senders_kind():
    pacing = load({}).dispatch.pacing
    assert (pacing.email_max_per_second, pacing.sms_max_per_second, pacing.twilio_sender_mps) == (10_000, 100, None)
    twilio = {"SMS_TRANSPORT": "twilio", "TWILIO_FROM": "+18005550100"}
    assert load(twilio).dispatch.pacing.twilio_sender_mps == 3.0  # toll-free
    assert load({**twilio, "TWILIO_SENDER_MPS": "30"}).dispatch.pacing.twilio_sender_mps == 30.0


@pytest.mark.parametrize(
    "env, problem",
    [
        ({"EMAIL_MAX_PER_SECOND": "0"}, "EMAIL_MAX_PER_SECOND must be > 0"),
        ({"SEND_CONCURRENCY_MAX_EMAIL": "0"}, "SEND_CONCURRENCY_MAX_EMAIL must be >= 1"),
        ({"DISPATCH_MAX_PARALLEL": "-1"}, "DISPATCH_MAX_PARALLEL must be >= 0"),
        ({"DISPATCH_FANOUT_URL": "ftp://x"}, "DISPATCH_FANOUT_URL must be an http(s) URL"),
        ({"DISPATCH_FANOUT_URL": "https://d", "DISPATCH_FANOUT_QUEUE": "q"}, "DISPATCH_FANOUT_QUEUE must be projects/"),
        ({"DISPATCH_FANOUT_URL": "https://d", "DISPATCH_FANOUT_QUEUE": QUEUE}, "needs DISPATCH_FANOUT_SERVICE_ACCOUNT"),
        ({"DISPATCH_FANOUT_QUEUE": QUEUE, "DISPATCH_FANOUT_SERVICE_ACCOUNT": "a@b"}, "need DISPATCH_FANOUT_URL"),
        ({"DISPATCH_NUDGE_URL": "ftp://x"}, "DISPATCH_NUDGE_URL must be an http(s) URL"),
        ({"DISPATCH_NUDGE_URL": "https://d", "DISPATCH_NUDGE_QUEUE": QUEUE}, "needs DISPATCH_NUDGE_SERVICE_ACCOUNT"),
        ({"DISPATCH_NUDGE_QUEUE": QUEUE, "DISPATCH_NUDGE_SERVICE_ACCOUNT": "a@b"}, "QUEUE needs DISPATCH_NUDGE_URL"),
        ({"DISPATCH_NUDGE_SECONDS": "0"}, "DISPATCH_NUDGE_SECONDS must be > 0"),
        ({"DISPATCH_NUDGE_SECONDS": "61"}, "DISPATCH_NUDGE_SECONDS must be <= 60"),
    ],
)
def test_a_bad_limit_fanout_or_nudge_setting_is_refused_with_its_name(env, problem):
    with pytest.raises(ConfigError) as caught:
        load(env)
    assert any(problem in p for p in caught.value.problems), caught.value.problems


def test_fanout_is_on_with_a_target_and_in_production_only_through_the_queue():
    assert not load({}).dispatch.fanout.enabled
    local = load({"DISPATCH_FANOUT_URL": "http://127.0.0.1:8083/"}).dispatch.fanout
    assert local.enabled and local.queue is None and local.max_parallel == 4
    assert not load(
        {"DISPATCH_FANOUT_URL": "http://127.0.0.1:8083/", "DISPATCH_MAX_PARALLEL": "0"}
    ).dispatch.fanout.enabled
    production = {"ENVIRONMENT": "production", "DISPATCH_FANOUT_URL": "http://dispatch.internal/"}
    with pytest.raises(ConfigError) as caught:
        load(production)
    assert "DISPATCH_FANOUT_URL must be https in production, got 'http://dispatch.internal/'" in caught.value.problems
    with pytest.raises(ConfigError) as caught:
        load({**production, "DISPATCH_FANOUT_URL": "https://dispatch.internal/"})
    assert "in production DISPATCH_FANOUT_URL must go through DISPATCH_FANOUT_QUEUE" in caught.value.problems


def test_the_oldest_ready_page_defaults_to_a_fifth_of_the_link_ttl():
    assert load({}).signals.ready_age_alert_seconds == 120
    short = load({"VERIFICATION_TTL_SECONDS": "300"}).signals
    assert (short.ready_age_alert_seconds, short.ttl_seconds) == (60, 300)
    assert load({"READY_AGE_ALERT_SECONDS": "45"}).signals.ready_age_alert_seconds == 45
