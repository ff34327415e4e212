"""The outbox's vocabulary is defined once (outbox/states.py) and the database agrees with it: the
status and outcome CHECK constraints (the intents', the attempts', the verifications') hold the same sets. Every statement that changes an intent's
status is a section of the outbox's catalogue or functions declaring its transition (states.transitions()
reads those lines), and no other section of any catalogue writes a status."""

from __future__ import annotations

import re

from signup_verification.outbox.states import AttemptOutcome, IntentStatus, VerificationStatus, transitions
from signup_verification.platform.catalogue import FUNCTIONS, OWNERS, QUERIES, catalogue

_CHECK = "SELECT pg_get_constraintdef(oid) AS definition FROM pg_constraint WHERE conname = :name"


def _allowed(db, constraint: str) -> set[str]:
    [row] = db.rows(_CHECK, name=constraint)
    return set(re.findall(r"'([a-z_]+)'::text", row["definition"]))


def test_the_enums_are_the_schemas_check_constraints(db):
    assert _allowed(db, "delivery_intents_status_check") == {s.value for s in IntentStatus}
    assert _allowed(db, "delivery_attempts_outcome_check") == {o.value for o in AttemptOutcome}
    assert _allowed(db, "verifications_status_check") == {s.value for s in VerificationStatus}


# A guard on where status writes are, not where transitions are read from (the `-- transition:`
# lines are): it finds the shapes the statements use, and its own test below keeps it honest.
_COMMENT = re.compile(r"--[^\n]*")
_UPDATE = re.compile(r"UPDATE\s+delivery_intents\b(.*?)(?:\bWHERE\b|\bFROM\b|\bRETURNING\b)", re.S | re.I)
_INSERT = re.compile(r"INSERT\s+INTO\s+delivery_intents\b", re.I)  # a new intent gets a status
_SETS_STATUS = re.compile(r"(?:\bSET\s*\(\s*status\b|[,\s]status\s*=)", re.I)


def changes_status(sql: str) -> bool:
    text = _COMMENT.sub("", sql)
    return any(_SETS_STATUS.search(m.group(1)) for m in _UPDATE.finditer(text)) or bool(_INSERT.search(text))


def _sections():
    for owner in OWNERS:
        for kind in (QUERIES, FUNCTIONS):
            for section in catalogue(owner, kind).sections.values():
                yield section.where, section


def test_every_statement_that_changes_an_intent_status_is_an_outbox_transition():
    changing = {where for where, section in _sections() if changes_status(section.text)}
    declared = {t.statement for t in transitions()}
    assert changing - declared == set(), "change an intent's status without a `-- transition:` line in the outbox"
    assert declared - changing == set(), "declare a transition but change no status"
    assert all(where.startswith("outbox/") for where in declared)


def test_the_transitions_read_from_the_catalogue():
    by_statement = {t.statement: t for t in transitions()}
    claim = by_statement["outbox/queries/claim.sql:claim"]
    assert (claim.before, claim.after) == ({"ready", "retryable"}, {"claimed", "attempting"}) and claim.why
    assert by_statement["outbox/functions/60_enqueue.sql:enqueue_steps"].before == set()  # `(new)`: it creates intents
    # every status is reached by some transition, and every one but the created ones is left by one
    assert set().union(*(t.after for t in transitions())) == set(IntentStatus)


def test_the_detector_sees_the_shapes_the_statements_use():
    assert changes_status("UPDATE delivery_intents AS i SET (status, attempts) = (SELECT 1) WHERE true")
    assert changes_status("UPDATE delivery_intents SET last_error = NULL, status = 'failed' WHERE id = 1")
    assert not changes_status("UPDATE delivery_intents SET next_attempt_at = now() WHERE status = 'ready'")
    assert not changes_status("-- SET status = 'x'\nUPDATE delivery_intents SET destination = NULL FROM p")
    assert changes_status("INSERT INTO delivery_intents (verification_id, channel) VALUES (1, 'webhook')")
