"""Duty purge (purge_history): redacted histories past retention are deleted, after redaction."""

from __future__ import annotations

from dataclasses import replace

from signup_verification.outbox import transitions as t
from signup_verification.outbox.transitions import Settlement
from signup_verification.platform.database import Database
from support.factories import CONFIG, deliver, intent, make_verifications, run


def _age_history(db: Database, days: int) -> None:
    db.run(
        "UPDATE verifications SET created_at = now() - make_interval(days => :d), "
        "expires_at = now() - make_interval(days => :d) + interval '10 minutes'",
        d=days,
    )
    db.run(
        "UPDATE delivery_intents SET completed_at = now() - make_interval(days => :d) WHERE completed_at IS NOT NULL",
        d=days,
    )


def test_retention_redacts_destinations_then_purges_history(db):
    ids = make_verifications(db, 2)
    [claimed] = t.claim(db, "w", 1, 30)
    t.begin_attempts(db, "w", [claimed.fence])
    t.settle(
        db,
        "w",
        [
            Settlement(
                claimed.id,
                claimed.lease_version,
                "failed",
                0,
                "smtp_5xx",
                "550 5.1.1 <User0.acct@Example.com>: Recipient address rejected",
            )
        ],
    )
    run(db)  # nothing is old yet
    assert db.run("SELECT count(*) FROM verifications WHERE destination IS NULL") == [[0]]

    _age_history(db, 31)
    report = run(db)  # the second intent expires and is suppressed, then both are redacted
    assert report.moves["destinations_redacted"] == 2 and report.moves["verifications_purged"] == 0
    rows = db.rows("SELECT destination, redacted_at IS NOT NULL AS redacted FROM verifications")
    assert rows == [{"destination": None, "redacted": True}] * 2
    details = [r[0] for r in db.run("SELECT error_detail FROM delivery_attempts WHERE error_detail IS NOT NULL")]
    assert details == ["550 5.1.1 <[redacted]>: Recipient address rejected"]
    assert "example.com" not in intent(db, ids[0])["last_error"].lower()

    _age_history(db, 91)
    report = run(db)
    assert report.moves["verifications_purged"] == 2
    for table in ("verifications", "delivery_intents", "delivery_attempts"):
        assert db.run(f"SELECT count(*) FROM {table}") == [[0]], table


def test_purge_keeps_a_verification_another_one_still_points_at(db):
    """`older.superseded_by = newer`: newer may only go with or after older (the foreign key)."""
    [older] = make_verifications(db, 1)
    [newer] = make_verifications(db, 1, prefix="acct", key="again")  # same account: supersedes `older`
    assert db.one("SELECT superseded_by FROM verifications WHERE id = :id", id=older)["superseded_by"] == newer
    deliver(db)
    _age_history(db, 100)
    # The newer history finished first (it can: the older intent was mid-send when superseded).
    db.run(
        "UPDATE delivery_intents SET completed_at = completed_at - interval '1 hour' WHERE verification_id = :v",
        v=newer,
    )
    config = replace(CONFIG, batch_size=1)
    report = run(db, config)
    assert report.moves["destinations_redacted"] == 2
    assert report.moves["verifications_purged"] == 0  # newer first in line, held back by older
    config = replace(CONFIG, batch_size=2)
    assert run(db, config).moves["verifications_purged"] == 2
