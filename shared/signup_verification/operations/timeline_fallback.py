"""`verifyctl inspect` for a verification of several steps: each later step's delivery (the fallback,
step 3), what happened to it, and why it was or was not sent. Masked destination; error texts redacted."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from ..outbox.states import AttemptOutcome, IntentStatus
from ..platform.catalogue import catalogue
from ..platform.database import Database
from ..platform.redaction import mask_destination, redact_text
from ..platform.timestamps import rfc3339
from .reasons import failure_reason, render_reason

_QUERIES = catalogue("operations")
_SQL = _QUERIES["timeline_fallback"]
_TIMELINE_ATTEMPTS = _QUERIES["timeline_attempts"]
_DEATHS = {
    "verified": "the verification was confirmed first (by the other channel)",
    "superseded": "a newer verification replaced this one first",
    "expired": "the verification expired first",
    "locked": "the verification was locked (too many wrong codes) first",
    "redacted": "the destination was redacted",
}


def later_steps(db: Database, verification_id: uuid.UUID) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Each later step's intent (masked) and its attempt log, in step order; none under policy single."""
    return [_step(db, row) for row in db.rows(_SQL, verification_id=verification_id)]


def _step(db: Database, row: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    intent = {k: v for k, v in row.items() if k not in ("destination", "last_error") and not k.startswith("failure_")}
    intent["destination"] = mask_destination(row["channel"], row["destination"])
    intent["reason"] = failure_reason(row)
    intent["last_error"] = redact_text(row["last_error"]) if row["last_error"] else None
    intent["why"] = why(row)
    return intent, db.rows(_TIMELINE_ATTEMPTS, intent_id=row["id"])


def due_reason(intent: dict[str, Any]) -> str:
    """timer | primary_failed | at_once: why a later step became due (the signals count the same;
    primary_failed: the step before it failed for good)."""
    if intent["brought_forward_at"] is not None:
        return "primary_failed"
    return "at_once" if intent["policy"] == "both" else "timer"


def why(intent: dict[str, Any]) -> str:
    """One line: why the later step was or was not sent."""
    status, after = intent["status"], intent["after_seconds"]
    before = "the primary" if intent["step"] == 2 else f"step {intent['step'] - 1}"
    reason = {
        "primary_failed": f"{before} failed for good at {clock(intent['brought_forward_at'])}: brought forward",
        "at_once": "policy both (after_seconds 0): sent with the primary",
        "timer": f"{after} s passed without a confirmation",
    }[due_reason(intent)]
    if status == IntentStatus.SUPPRESSED:
        death = _DEATHS.get(intent["suppression_reason"], intent["suppression_reason"])
        return f"not sent: {death} ({clock(intent['completed_at'])}, it was due {clock(intent['next_attempt_at'])})"
    if intent["attempts"] == 0 and status == IntentStatus.READY:
        if intent["brought_forward_at"] is not None:
            return f"due now: {reason}"
        return f"waiting: due {clock(intent['next_attempt_at'])} ({after} s after create) unless confirmed first"
    if status == IntentStatus.ACCEPTED:
        return f"sent: {reason}"
    if status == IntentStatus.FAILED:
        return f"sent and failed for good: {reason}"
    return f"sending ({status}): {reason}"


def events(intent: dict[str, Any], attempts: list[dict[str, Any]]) -> list[tuple[datetime, str, str]]:
    """(at, kind, detail) for the timeline: a later step's schedule, claims, attempts and outcome."""
    label = f"{intent['channel']} {name(intent)} (intent {intent['id']})"
    found = [
        (
            intent["created_at"],
            "intended",
            f"{label} to {intent['destination']}, policy {intent['policy']}, due {clock(intent['next_attempt_at'])}",
        )
    ]
    if intent["brought_forward_at"] is not None:
        found.append((intent["brought_forward_at"], "brought forward", f"{label}: the step before failed for good"))
    for a in attempts:
        if a["outcome"] == AttemptOutcome.ATTEMPTING:
            found.append(
                (a["attempted_at"] or a["observed_at"], "attempted", f"{label} attempt {a['attempt_number']} began")
            )
        else:
            detail = f"{label} attempt {a['attempt_number']} {a['outcome']}"
            if a["error_class"]:
                detail += f"; {a['error_class']}: {redact_text(a['error_detail'] or '')}".rstrip(": ")
            found.append((a["observed_at"], "observed", detail))
    if intent["status"] == IntentStatus.SUPPRESSED and intent["completed_at"]:
        found.append(
            (intent["completed_at"], "suppressed", f"{label} not sent: verification {intent['suppression_reason']}")
        )
    return found


def render_line(intent: dict[str, Any]) -> str:
    failed = f"  failed: {render_reason(intent['reason'])}" if intent.get("reason") else ""
    return (
        f"  {name(intent)} {intent['id']}  {intent['channel']}  {intent['destination']}  status {intent['status']}  "
        f"attempts {intent['attempts']}/{intent['max_attempts']}  {intent['why']}{failed}"
    )


def name(intent: dict[str, Any]) -> str:
    """How the timeline names a later step: step 2 is the fallback."""
    return "fallback" if intent["step"] == 2 else f"step {intent['step']}"


def clock(at: datetime | None) -> str:
    """A time in the timeline, text and JSON alike: the one format (RFC 3339, UTC, Z, ms), or '-'."""
    return rfc3339(at) if at else "-"
