"""Every transition of the outbox state machine against a real PostgreSQL, fencing included."""

from __future__ import annotations

import uuid

import pytest

from signup_verification.api import create as verifications
from signup_verification.api.models import CreateVerificationRequest
from signup_verification.outbox import transitions as t
from signup_verification.outbox.config import RetryPolicy
from signup_verification.outbox.transitions import Settlement
from signup_verification.verifications.tokens import Keyring
from support.config import make_config
from support.paths import TEST_TOKEN_KEYS

SETTINGS = make_config(rate_limit_per_hour=1000, rate_limit_spacing_seconds=0).create
KEYRING = Keyring.parse(TEST_TOKEN_KEYS)


def make_intents(db, n: int, channel: str = "email") -> list[uuid.UUID]:
    ids = []
    for i in range(n):
        destination = f"user{i}@example.com" if channel == "email" else f"+1415555{i:04d}"
        request = CreateVerificationRequest(account_id=f"acct-{i}", channel=channel, destination=destination)
        result = verifications.create_verification(db, SETTINGS, KEYRING, request, f"key-{channel}-{i}")
        ids.append(uuid.UUID(result.body["verification_id"]))
    return ids


def status_of(db, intent_id: int) -> dict:
    return db.one("SELECT * FROM delivery_intents WHERE id = :id", id=intent_id)


def test_claim_takes_eligible_in_order_and_bumps_lease_version(db):
    make_intents(db, 3)
    claimed = t.claim(db, "w1", 2, 30)
    assert [c.id for c in claimed] == [1, 2]
    assert all(c.lease_version == 1 and c.verification_status == "pending" for c in claimed)
    row = status_of(db, 1)
    assert row["status"] == "claimed" and row["lease_owner"] == "w1" and row["lease_until"] is not None
    # A second worker skips what the first holds.
    assert [c.id for c in t.claim(db, "w2", 5, 30)] == [3]
    assert t.claim(db, "w3", 5, 30) == []


def test_future_intents_are_not_eligible(db):
    make_intents(db, 1)
    db.run("UPDATE delivery_intents SET next_attempt_at = now() + interval '10 minutes'")
    assert t.claim(db, "w1", 10, 30) == []


def test_begin_and_settle_accepted_write_attempt_rows(db):
    make_intents(db, 1)
    [intent] = t.claim(db, "w1", 1, 30)
    [begun] = t.begin_attempts(db, "w1", [intent.fence])
    assert begun.attempt_id == f"{intent.id}:1"
    assert status_of(db, intent.id)["status"] == "attempting"
    applied = t.settle(db, "w1", [Settlement(intent.id, intent.lease_version, "accepted", provider_ref="msg-1")])
    assert applied == {intent.id: "accepted"}
    row = status_of(db, intent.id)
    assert (row["status"], row["provider_ref"], row["lease_owner"]) == ("accepted", "msg-1", None)
    assert row["completed_at"] is not None
    outcomes = db.run("SELECT attempt_id, outcome FROM delivery_attempts ORDER BY id")
    assert outcomes == [[f"{intent.id}:1", "attempting"], [f"{intent.id}:1", "accepted"]]


def test_retryable_backs_off_then_fails_when_attempts_are_exhausted(db):
    make_intents(db, 1)
    db.run("UPDATE delivery_intents SET max_attempts = 2")
    for attempt in (1, 2):
        [intent] = t.claim(db, "w", 1, 30)
        t.begin_attempts(db, "w", [intent.fence])
        applied = t.settle(
            db, "w", [Settlement(intent.id, intent.lease_version, "retryable", 60, "smtp_4xx", "421 busy")]
        )
        row = status_of(db, intent.id)
        assert applied == {intent.id: row["status"]}  # settle answers the status it left
        if attempt == 1:
            assert row["status"] == "retryable"
            assert t.claim(db, "w", 1, 30) == []  # backing off: not eligible for a minute
            db.run("UPDATE delivery_intents SET next_attempt_at = now()")
    assert row["status"] == "failed" and row["last_error"].startswith("attempts_exhausted")


def test_stale_worker_cannot_settle_after_takeover(db):
    make_intents(db, 1)
    [old] = t.claim(db, "old", 1, 30)
    t.begin_attempts(db, "old", [old.fence])
    # The lease expires; the reconciler moves the attempt to ambiguous, a retry makes it eligible.
    db.run("UPDATE delivery_intents SET lease_until = now() - interval '1 second'")
    assert t.settle(db, "old", [Settlement(old.id, old.lease_version, "accepted")]) == {}
    policy = RetryPolicy()
    assert t.lose_leases(db, policy, 10) == [(old.id, "email")]
    db.run("UPDATE delivery_intents SET next_attempt_at = now()")
    assert t.resolve_ambiguous(db, policy, 10) == [(old.id, "email", "retryable")]
    [new] = t.claim(db, "new", 1, 30)
    assert new.lease_version == old.lease_version + 1
    # The old worker's late writes, with its old fence, change nothing.
    assert t.settle(db, "old", [Settlement(old.id, old.lease_version, "accepted")]) == {}
    assert t.release(db, "old", [old.fence]) == set()
    assert t.renew(db, "old", [old.fence], 60) == {}
    assert t.begin_attempts(db, "old", [old.fence]) == []
    # Same owner name with the old version is refused too: the version is the fence.
    assert t.begin_attempts(db, "new", [(old.id, old.lease_version)]) == []
    assert status_of(db, new.id)["status"] == "claimed"
    kinds = db.run("SELECT outcome, error_class FROM delivery_attempts ORDER BY id")
    assert kinds == [["attempting", None], ["ambiguous", "lease_lost"]]


def test_release_is_not_an_attempt(db):
    make_intents(db, 1)
    [intent] = t.claim(db, "w", 1, 30)
    assert t.release(db, "w", [intent.fence]) == {intent.id}
    row = status_of(db, intent.id)
    assert (row["status"], row["attempts"], row["lease_owner"]) == ("ready", 0, None)
    assert db.run("SELECT count(*) FROM delivery_attempts") == [[0]]


def test_renew_extends_only_a_current_lease(db):
    make_intents(db, 1)
    [intent] = t.claim(db, "w", 1, 5)
    renewed = t.renew(db, "w", [intent.fence], 120)
    assert renewed[intent.id] > intent.lease_until


def test_reconciler_expires_abandoned_claims(db):
    make_intents(db, 2)
    claimed = t.claim(db, "crashed", 2, 30)
    db.run("UPDATE delivery_intents SET lease_until = now() - interval '1 second' WHERE id = :id", id=claimed[0].id)
    assert t.expire_claims(db, 10) == [(claimed[0].id, "email")]
    assert status_of(db, claimed[0].id)["status"] == "ready"
    assert status_of(db, claimed[1].id)["status"] == "claimed"


def test_hold_policy_keeps_sms_ambiguous(db):
    make_intents(db, 1, channel="sms")
    [intent] = t.claim(db, "w", 1, 30)
    t.begin_attempts(db, "w", [intent.fence])
    t.settle(db, "w", [Settlement(intent.id, intent.lease_version, "ambiguous", 0, "timeout", "read timed out")])
    assert t.resolve_ambiguous(db, RetryPolicy(), 10) == []
    row = status_of(db, intent.id)
    assert (row["status"], row["ambiguous_count"]) == ("ambiguous", 1)


@pytest.mark.parametrize("death", ["superseded", "expired"])
def test_dead_verifications_are_suppressed(db, death):
    [vid] = make_intents(db, 1)
    if death == "expired":
        db.run(
            "UPDATE verifications SET created_at = now() - interval '1 hour', expires_at = now() - interval '1 second'"
        )
    else:
        request = CreateVerificationRequest(account_id="acct-0", channel="email", destination="other@example.com")
        verifications.create_verification(db, SETTINGS, KEYRING, request, "second")
    suppressed = t.sweep_dead(db, 100).suppressed
    if death == "superseded":
        # create already suppressed it in the same transaction; nothing left for the sweep.
        assert suppressed == []
    else:
        assert suppressed == [("expired", 1)]
    row = db.one(
        "SELECT i.status, i.suppression_reason, v.status AS v FROM delivery_intents i "
        "JOIN verifications v ON v.id = i.verification_id WHERE v.id = :id",
        id=vid,
    )
    assert row == {"status": "suppressed", "suppression_reason": death, "v": death}
