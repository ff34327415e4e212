"""Provider pacing (delivery/pacing.py): each sender takes its turn within the provider's rate,
n invocations share it, and a 429 pauses the channel for the provider's Retry-After."""

from __future__ import annotations

import pytest

from signup_verification.delivery import pacing
from signup_verification.delivery.capacity_config import PacingConfig, documented_sender_mps


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_sends_beyond_the_burst_wait_their_turn_at_the_rate():
    clock = Clock()
    pacer = pacing.from_config(PacingConfig(email_max_per_second=5.0), clock)
    waits = [pacer.permit("email").wait for _ in range(14)]
    assert waits[:10] == [0.0] * 10  # the bucket starts with BURST_SECONDS of the rate
    assert waits[10:] == pytest.approx([0.2, 0.4, 0.6, 0.8])
    clock.now += 1.0  # a second later five more turns have come
    assert pacer.permit("email").wait == pytest.approx(0.0)


def test_sms_pay_their_segments_to_the_twilio_sender_and_a_request_to_the_api():
    clock = Clock()
    pacer = pacing.from_config(PacingConfig(sms_max_per_second=100.0, twilio_sender_mps=1.0), clock)
    assert pacer.rate("sms") == 1.0
    assert pacer.permit("sms", segments=2).wait == 0.0  # the burst: two seconds of one segment/s
    assert pacer.permit("sms", segments=2).wait == pytest.approx(2.0)
    assert pacer.rate("webhook") is None and pacer.permit("webhook").wait == 0.0  # no limit


def test_a_turn_not_taken_is_given_back():
    clock = Clock()
    pacer = pacing.from_config(PacingConfig(email_max_per_second=1.0), clock)
    pacer.permit("email"), pacer.permit("email")
    late = pacer.permit("email")
    assert late.wait == pytest.approx(1.0)
    pacer.cancel(late)
    assert pacer.permit("email").wait == pytest.approx(1.0)  # the same turn again, not a later one


def test_invocations_sharing_the_deployment_each_take_a_share():
    pacer = pacing.from_config(PacingConfig(email_max_per_second=300.0), Clock())
    pacer.share(3)
    assert pacer.rate("email") == pytest.approx(100.0)
    pacer.share(1)
    assert pacer.rate("email") == pytest.approx(300.0)


def test_a_429_pauses_the_channel_once_for_the_providers_wait_and_is_published_once():
    clock = Clock()
    pacer = pacing.from_config(PacingConfig(), clock)
    assert pacer.slow_down("email", 3.0, "sendgrid: 429") == 3.0
    assert pacer.slow_down("email", 1.0, "sendgrid: 429") == 1.0  # shorter: the longer pause stays
    permit = pacer.permit("email")
    assert permit.paused and permit.wait == pytest.approx(3.0)
    assert not pacer.permit("sms").paused  # the other channel goes on
    assert pacer.unpublished() == {"email": (3.0, "sendgrid: 429")}
    assert pacer.unpublished() == {}
    clock.now += 3.0
    assert not pacer.permit("email").paused


def test_the_slow_down_is_bounded():
    assert pacing.slow_down_seconds(None) == pacing.SLOW_DOWN_DEFAULT_SECONDS
    assert pacing.slow_down_seconds(0.0) == pacing.SLOW_DOWN_DEFAULT_SECONDS
    assert pacing.slow_down_seconds(86_400.0) == pacing.SLOW_DOWN_MAX_SECONDS


@pytest.mark.parametrize(
    "sender, mps",
    [("+15005550006", 1.0), ("+18005550100", 3.0), ("+18885550100", 3.0), ("12345", 100.0), ("MG" + "0" * 32, 1.0)],
)
def test_the_twilio_default_is_the_documented_rate_of_the_senders_kind(sender, mps):
    assert documented_sender_mps(sender) == mps
