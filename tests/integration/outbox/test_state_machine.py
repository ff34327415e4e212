"""The outbox's vocabulary is defined once (outbox/states.py) and the database agrees with it:
the status and outcome CHECK constraints (the intents', the attempts', the verifications') hold the
same sets, and every statement anywhere that changes an intent's status is in the transition table,
with nothing listed that does not."""

from __future__ import annotations

import re

from signup_verification.outbox.states import TRANSITIONS, AttemptOutcome, IntentStatus, VerificationStatus
from support.paths import ROOT

_CHECK = "SELECT pg_get_constraintdef(oid) AS definition FROM pg_constraint WHERE conname = :name"


def _allowed(db, constraint: str) -> set[str]:
    [row] = db.rows(_CHECK, name=constraint)
    return set(re.findall(r"'([a-z_]+)'::text", row["definition"]))


def test_the_enums_are_the_schemas_check_constraints(db):
    assert _allowed(db, "delivery_intents_status_check") == {s.value for s in IntentStatus}
    assert _allowed(db, "delivery_attempts_outcome_check") == {o.value for o in AttemptOutcome}
    assert _allowed(db, "verifications_status_check") == {s.value for s in VerificationStatus}


_COMMENT = re.compile(r"--[^\n]*")
_UPDATE = re.compile(r"UPDATE\s+delivery_intents\b(.*?)(?:\bWHERE\b|\bFROM\b|\bRETURNING\b)", re.S | re.I)
_INSERT = re.compile(r"INSERT\s+INTO\s+delivery_intents\s*\(([^)]*)\)", re.S | re.I)
_SETS_STATUS = re.compile(r"(?:\bSET\s*\(\s*status\b|[,\s]status\s*=)", re.I)


def changes_status(sql: str) -> bool:
    text = _COMMENT.sub("", sql)
    updates = any(_SETS_STATUS.search(m.group(1)) for m in _UPDATE.finditer(text))
    inserts = any(re.search(r"\bstatus\b", m.group(1)) for m in _INSERT.finditer(text))
    return updates or inserts


def test_every_statement_that_changes_an_intent_status_is_listed():
    files = sorted(ROOT.glob("sql/**/*.sql")) + sorted(ROOT.glob("shared/signup_verification/**/*.sql"))
    changing = {str(f.relative_to(ROOT)) for f in files if changes_status(f.read_text())}
    listed = {t.statement for t in TRANSITIONS}
    assert changing - listed == set(), "change an intent's status but are not in outbox/states.py TRANSITIONS"
    assert listed - changing == set(), "listed in outbox/states.py TRANSITIONS but change no status"


def test_the_detector_sees_the_shapes_the_statements_use():
    assert changes_status("UPDATE delivery_intents AS i SET (status, attempts) = (SELECT 1) WHERE true")
    assert changes_status("UPDATE delivery_intents SET last_error = NULL, status = 'failed' WHERE id = 1")
    assert not changes_status("UPDATE delivery_intents SET next_attempt_at = now() WHERE status = 'ready'")
    assert not changes_status("-- SET status = 'x'\nUPDATE delivery_intents SET destination = NULL FROM p")
    assert changes_status("INSERT INTO delivery_intents (verification_id, status) VALUES (1, 'ready')")
