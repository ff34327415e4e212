"""Duty redact (redact_destinations): finished, old verifications lose their destination."""

from __future__ import annotations

from dataclasses import replace

from support.factories import CONFIG, make_verifications, run


def test_retention_leaves_live_and_recent_work_alone(db):
    [old, recent] = make_verifications(db, 2)
    db.run(
        "UPDATE verifications SET created_at = now() - interval '100 days', expires_at = now() + interval '1 day'"
        " WHERE id = :id",
        id=old,
    )  # still pending: its intent is live
    report = run(db, replace(CONFIG, redact_after_seconds=0, purge_after_seconds=0))
    assert report.moves["destinations_redacted"] == 0 and report.moves["verifications_purged"] == 0
    assert db.run("SELECT count(*) FROM verifications WHERE destination IS NOT NULL") == [[2]]
