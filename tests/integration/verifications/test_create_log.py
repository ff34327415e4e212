"""Create logs one structured line per outcome, with nothing sensitive in it."""

from __future__ import annotations

from signup_verification.api.problems import Problem
from signup_verification.verifications.config import CreateConfig
from support.factories import create


def _create(db, key, account="acct-1"):
    """Ada's create under the default limits: its body, or a refusal's status."""
    try:
        return create(db, "ada.secret@example.com", account=account, key=key, config=CreateConfig()).body
    except Problem as problem:
        return problem.status


def test_each_create_outcome_logs_one_line_without_the_destination_or_key(db, log_lines):
    first = _create(db, "key-secret-1")
    _create(db, "key-secret-1")  # replayed
    _create(db, "key-secret-1", account="acct-2")  # same key, other body
    assert _create(db, "key-secret-2") == 429  # spacing: one per minute per destination

    lines = log_lines.events("create")
    assert [(r["outcome"], r["channel"]) for r in lines] == [
        ("created", "email"),
        ("replayed", "email"),
        ("key_reused", "email"),
        ("rate_limited", "email"),
    ]
    assert [r["verification_id"] for r in lines] == [first["verification_id"]] * 2 + [None, None]
    assert 0 < lines[3]["retry_after"] <= 60
    text = log_lines.text()
    assert "ada.secret" not in text and "key-secret" not in text
