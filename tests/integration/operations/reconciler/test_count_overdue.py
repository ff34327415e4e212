"""Duty count_overdue: eligible work past the polling horizon is counted and logged, never moved."""

from __future__ import annotations

import pytest

from support.factories import make_verifications, run, statuses


def test_eligible_intents_past_the_polling_horizon_are_counted_and_logged(db, log_lines):
    make_verifications(db, 3)
    make_verifications(db, 1, channel="sms")
    db.run("UPDATE delivery_intents SET next_attempt_at = now() - interval '10 minutes' WHERE id IN (1, 2)")
    db.run("UPDATE delivery_intents SET next_attempt_at = now() + interval '10 minutes' WHERE id = 3")  # scheduled
    report = run(db)
    assert report.as_json()["overdue"] == {"email": {"count": 2, "oldest_seconds": pytest.approx(600, abs=5)}}
    [warning] = log_lines.events("overdue_eligible")
    assert warning["severity"] == "WARNING" and warning["overdue_count"] == 2 and warning["channel"] == "email"
    assert statuses(db) == {1: "ready", 2: "ready", 3: "ready", 4: "ready"}  # counted, never moved or sent
