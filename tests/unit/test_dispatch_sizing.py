"""How much one dispatch invocation takes on and sends at once (delivery/batch_sizing.py), and the
fan-out's rule for how many more invocations a backlog calls for (delivery/fanout.py)."""

from __future__ import annotations

import pytest

from signup_verification.delivery.batch_sizing import MIN_LEASE_SECONDS, SETTLE_RESERVE, budget, plan_batch
from signup_verification.delivery.fanout import invocations_wanted, siblings_to_start


def test_a_batch_holds_what_each_channel_sends_within_the_window():
    """200 ms email at 128 in flight: 8 rounds in a 2 s window; slower SMS at 4 in flight: 2 rounds."""
    budgets = {"email": budget(0.2, 128), "sms": budget(0.8, 4)}
    plan = plan_batch(60.0, budgets, max_batch=5000, batch_seconds=2.0)
    assert plan is not None
    assert plan.limits == {"email": 128 * 8, "sms": 4 * 2}
    assert plan.size == 128 * 8 + 8
    assert plan.expected_seconds == pytest.approx(max(8 * 0.25, 2 * 1.0))
    assert plan.lease_seconds == MIN_LEASE_SECONDS


def test_the_batch_cap_and_the_time_left_bound_it():
    budgets = {"email": budget(0.2, 128)}
    assert plan_batch(60.0, budgets, max_batch=500, batch_seconds=2.0).limits == {"email": 500}
    # 0.7 s left after the settle reserve: two rounds of 0.25 s
    assert plan_batch(SETTLE_RESERVE + 0.7, budgets, 5000, 2.0).limits == {"email": 256}
    # not one send fits: no batch at all
    assert plan_batch(SETTLE_RESERVE + 0.1, budgets, 5000, 2.0) is None


def test_a_channel_that_cannot_finish_a_send_in_time_gets_nothing_and_the_others_still_go():
    budgets = {"email": budget(0.2, 8), "sms": budget(4.0, 8)}
    plan = plan_batch(SETTLE_RESERVE + 2.0, budgets, 5000, 2.0)
    assert plan is not None and plan.limits == {"email": 8 * 8, "sms": 0}


def test_the_providers_rate_caps_the_batch_and_the_sends_in_flight():
    """A long code at 1 segment/s: a 2 s batch holds 2 SMS, and 2 in flight would only queue."""
    paced = budget(0.2, 32, rate=1.0)
    plan = plan_batch(60.0, {"sms": paced}, 5000, 2.0)
    assert plan is not None and plan.limits == {"sms": 2}
    assert paced.inflight(2) == 2 and paced.inflight(100) == 2  # ceil(1/s x 0.25 s) + 1
    assert paced.seconds(2) == pytest.approx(2.0)  # at the rate, not at the latency
    assert budget(0.2, 128, rate=10_000.0).inflight(500) == 128


def test_a_small_batch_is_sent_all_at_once_and_a_big_one_with_every_sender():
    b = budget(0.2, 128)
    assert [b.inflight(n) for n in (1, 5, 128, 500)] == [1, 5, 128, 128]
    assert b.seconds(5) == pytest.approx(0.25) and b.seconds(500) == pytest.approx(4 * 0.25)
    assert b.capacity() == pytest.approx(128 / 0.25)


def test_fan_out_asks_for_invocations_that_drain_the_backlog_in_time():
    capacity = {"email": 100.0, "sms": 10.0}
    rates = {"email": None, "sms": None}
    assert invocations_wanted({"email": 900, "sms": 0}, capacity, rates, drain_seconds=10) == 1  # one copes
    assert invocations_wanted({"email": 3_500, "sms": 0}, capacity, rates, drain_seconds=10) == 4
    assert invocations_wanted({"email": 0, "sms": 250}, capacity, rates, drain_seconds=10) == 3  # its slowest channel
    assert invocations_wanted({"email": 0, "sms": 0}, capacity, rates, drain_seconds=10) == 1


def test_fan_out_never_asks_for_more_than_the_providers_rate_can_use():
    """Twilio paces a long code at 1 segment/s: one invocation already sends as fast as it allows."""
    wanted = invocations_wanted({"sms": 10_000}, {"sms": 10.0}, {"sms": 1.0}, drain_seconds=10)
    assert wanted == 1
    assert invocations_wanted({"email": 100_000}, {"email": 100.0}, {"email": 250.0}, drain_seconds=10) == 3


def test_siblings_stay_within_the_bound_and_count_the_live_ones():
    assert siblings_to_start(wanted=4, live=0, max_parallel=4) == 3  # the deciding invocation is one
    assert siblings_to_start(wanted=10, live=1, max_parallel=4) == 3
    assert siblings_to_start(wanted=10, live=4, max_parallel=4) == 0
    assert siblings_to_start(wanted=2, live=3, max_parallel=4) == 0
    assert siblings_to_start(wanted=5, live=0, max_parallel=0) == 0
