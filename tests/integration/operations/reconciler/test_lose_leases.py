"""Duty lose_leases: an attempt whose lease expired becomes ambiguous, with its attempt row."""

from __future__ import annotations

from signup_verification.outbox import transitions as t
from support.factories import expire_leases, make_verifications, run


def test_lost_lease_becomes_ambiguous_with_an_attempt_row(db):
    make_verifications(db, 1)
    [claimed] = t.claim(db, "crashed", 1, 30)
    t.begin_attempts(db, "crashed", [claimed.fence])
    expire_leases(db)
    report = run(db)
    assert report.moves["leases_lost"] == 1
    row = db.one("SELECT status, attempts, ambiguous_count, next_attempt_at > now() AS held FROM delivery_intents")
    assert row == {"status": "ambiguous", "attempts": 1, "ambiguous_count": 1, "held": True}
    log = db.run("SELECT attempt_id, outcome, error_class FROM delivery_attempts ORDER BY id")
    assert log == [[f"{claimed.id}:1", "attempting", None], [f"{claimed.id}:1", "ambiguous", "lease_lost"]]
