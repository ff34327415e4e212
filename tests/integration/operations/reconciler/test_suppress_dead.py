"""Duty suppress_dead: intents of dead verifications are suppressed with the reason."""

from __future__ import annotations

from dataclasses import replace

from support.factories import CONFIG, deliver, intent, make_verifications, run


def test_dead_verifications_are_suppressed_and_expired_ones_counted_past_one_batch(db):
    ids = make_verifications(db, 5)
    deliver(db, limit=3)  # three accepted: their verifications expire with nothing to suppress
    db.run("UPDATE verifications SET created_at = now() - interval '1 hour', expires_at = now() - interval '1 second'")
    report = run(db, replace(CONFIG, batch_size=2))
    assert report.moves["verifications_expired"] == 5  # three batches of at most two
    assert report.moves["suppressed_expired"] == 2 and report.moves["suppressed"] == 2
    assert {intent(db, v)["suppression_reason"] for v in ids[3:]} == {"expired"}
    assert db.run("SELECT count(*) FROM verifications WHERE status = 'pending'") == [[0]]


def test_superseded_and_verified_intents_are_suppressed_with_their_reason(db):
    [first] = make_verifications(db, 1)
    db.run("UPDATE verifications SET status = 'verified', verified_at = now()")
    [second] = make_verifications(db, 1, prefix="other")
    report = run(db)
    assert report.moves["suppressed_verified"] == 1
    assert intent(db, first)["suppression_reason"] == "verified"
    assert intent(db, second)["status"] == "ready"
