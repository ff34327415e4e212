"""Duty reap_refused_creates: refused creates' counts go once they are past every limit window; the
created verifications' rows stay (the purge sweep takes those with their verification)."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from support.factories import CONFIG, make_verifications, run


def _refused(db, age: str) -> uuid.UUID:
    rid = uuid.uuid4()
    db.run(
        "INSERT INTO create_events (verification_id, created_at, account_id, channel, destination_key, role)"
        " VALUES (:id, now() - CAST(:age AS interval), 'prober', 'email', NULL, 'refused')",
        id=rid,
        age=age,
    )
    return rid


def test_refused_counts_past_a_day_are_reaped_in_batches_and_nothing_else(db):
    make_verifications(db, 2)
    db.run("UPDATE create_events SET created_at = now() - interval '2 days'")  # old, but verifications' own
    for _ in range(3):
        _refused(db, "25 hours")
    recent = _refused(db, "50 minutes")  # still inside the one-hour window: it counts
    report = run(db, replace(CONFIG, batch_size=2))
    [duty] = [d for d in report.duties if d.duty == "reap_refused_creates"]
    assert report.moves["refused_creates_reaped"] == 3 and duty.batches == 2  # 2 + 1, the second one short
    assert db.run("SELECT verification_id FROM create_events WHERE role = 'refused'") == [[recent]]
    assert db.run("SELECT count(*) FROM create_events WHERE role = 'primary'") == [[2]]


def test_a_refused_row_names_no_destination(db):
    with pytest.raises(Exception, match="create_events_refused_keys"):
        db.run(
            "INSERT INTO create_events (verification_id, account_id, channel, destination_key, role)"
            " VALUES (:id, 'a', 'email', :k, 'refused')",
            id=uuid.uuid4(),
            k=b"k" * 32,
        )
