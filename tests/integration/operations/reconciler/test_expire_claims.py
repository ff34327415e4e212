"""Duty expire_claims: a claim whose lease expired before any send began is eligible again."""

from __future__ import annotations

from signup_verification.outbox import transitions as t
from support.factories import make_verifications, run, statuses


def test_expired_claim_becomes_eligible_again_and_is_not_an_attempt(db):
    make_verifications(db, 2)
    claimed = t.claim(db, "crashed", 2, 30)
    db.run("UPDATE delivery_intents SET lease_until = now() - interval '1 second' WHERE id = :id", id=claimed[0].id)
    report = run(db)
    assert report.moves["claims_expired"] == 1
    assert statuses(db) == {claimed[0].id: "ready", claimed[1].id: "claimed"}  # a current lease is left alone
    row = db.one("SELECT attempts, lease_owner FROM delivery_intents WHERE id = :id", id=claimed[0].id)
    assert row == {"attempts": 0, "lease_owner": None}
    assert db.run("SELECT count(*) FROM delivery_attempts") == [[0]]
