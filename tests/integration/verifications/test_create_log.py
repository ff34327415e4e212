"""Create logs one structured line per outcome, with nothing sensitive in it."""

from __future__ import annotations

from signup_verification.api import create as create_edge
from signup_verification.api.models import CreateVerificationRequest
from signup_verification.api.problems import Problem
from signup_verification.verifications.config import CreateConfig
from signup_verification.verifications.tokens import Keyring
from support.paths import TEST_TOKEN_KEYS

KEYRING = Keyring.parse(TEST_TOKEN_KEYS)
ADA = CreateVerificationRequest(account_id="acct-1", channel="email", destination="ada.secret@example.com")


def _create(db, request, key):
    try:
        return create_edge.create_verification(db, CreateConfig(), KEYRING, request, key).body
    except Problem as problem:
        return problem.status


def test_each_create_outcome_logs_one_line_without_the_destination_or_key(db, log_lines):
    first = _create(db, ADA, "key-secret-1")
    _create(db, ADA, "key-secret-1")  # replayed
    _create(db, ADA.model_copy(update={"account_id": "acct-2"}), "key-secret-1")  # same key, other body
    assert _create(db, ADA, "key-secret-2") == 429  # spacing: one per minute per destination

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
