"""Duty resolve_ambiguous: an ambiguous intent whose hold passed follows its channel's policy."""

from __future__ import annotations

from dataclasses import replace

import pytest

from signup_verification.outbox import transitions as t
from signup_verification.outbox.config import ChannelPolicy, RetryPolicy
from signup_verification.outbox.transitions import Settlement
from support.factories import CONFIG, intent, make_verifications, run


@pytest.mark.parametrize("policy, expected", [("retry", "retryable"), ("fail", "failed"), ("hold", "ambiguous")])
def test_ambiguous_after_its_hold_follows_the_channel_policy(db, policy, expected):
    make_verifications(db, 1)
    [claimed] = t.claim(db, "w", 1, 30)
    t.begin_attempts(db, "w", [claimed.fence])
    t.settle(db, "w", [Settlement(claimed.id, claimed.lease_version, "ambiguous", 300, "timeout", "read timed out")])
    config = replace(CONFIG, policy=RetryPolicy(channels={"email": ChannelPolicy(policy, 300)}))
    assert run(db, config).moves["ambiguous_to_retryable"] == 0  # hold not over yet: nothing moves
    db.run("UPDATE delivery_intents SET next_attempt_at = now() - interval '1 second'")
    report = run(db, config)
    assert intent(db, claimed.verification_id)["status"] == expected
    assert report.moves["ambiguous_to_retryable"] == (expected == "retryable")
    assert report.moves["ambiguous_to_failed"] == (expected == "failed")
