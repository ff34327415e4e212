"""`verifyctl inspect <verification_id>`: one verification's delivery, as a timeline.

    intended   the verification and its delivery intent were written (create)
    claimed    a worker leased the intent for an attempt
    attempted  the attempt began (the attempt row was written before the network call)
    observed   an outcome: accepted | retryable | ambiguous | failed (lease_lost: the reconciler)
    suppressed / verified / expired / superseded / redacted   what ended it
    proved     the other channel's secret proved its destination too, after the verification

The verification says which secret proved which destination (its `proofs`: the first, in
`verified_channel` and `verified_via`, made it verified), a failed delivery why it failed (its
reason: category, code, provider, whose fault). Below it, the
verification's webhook events: type, webhook-id, status, and each attempt.

Built from system-owned records only (verifications, delivery_intents, the append-only attempt log).
The destination is masked, the token and code never appear (they are not stored), and provider
error texts pass through the log redaction so a quoted address is masked too.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..delivery.events import webhook_id
from ..outbox.states import AttemptOutcome, IntentStatus, VerificationStatus
from ..platform.catalogue import catalogue
from ..platform.database import Database
from ..platform.redaction import mask_destination, redact_text
from ..platform.timestamps import rfc3339
from ..verifications.proofs import proofs, proved_at
from . import timeline_fallback, timeline_reports
from .reasons import failure_reason, render_reason
from .timeline_fallback import clock as _clock

_SQL = catalogue("operations")
_TIMELINE_VERIFICATION = _SQL["timeline_verification"]
_TIMELINE_ATTEMPTS = _SQL["timeline_attempts"]
_TIMELINE_EVENTS = _SQL["timeline_events"]


@dataclass(frozen=True)
class Event:
    at: datetime
    kind: str
    detail: str


@dataclass
class Timeline:
    verification: dict[str, Any]  # masked: safe to print
    intent: dict[str, Any] | None
    events: list[Event] = field(default_factory=list)
    fallback: dict[str, Any] | None = None  # the channel policy's fallback delivery (masked): step 2
    step3: dict[str, Any] | None = None  # step 3's delivery (masked), when there is one
    webhook_events: list[dict[str, Any]] = field(default_factory=list)  # each with its attempts

    def as_json(self) -> dict[str, Any]:
        def plain(value: Any) -> Any:
            return (
                rfc3339(value) if isinstance(value, datetime) else str(value) if isinstance(value, uuid.UUID) else value
            )

        steps = {name: {k: plain(v) for k, v in step.items()} for name, step in self._later() if step}
        return {
            "verification": {k: plain(v) for k, v in self.verification.items()},
            "delivery_note": delivery_note(self.verification, self.intent, self.fallback, self.step3),
            "intent": {k: plain(v) for k, v in self.intent.items()} if self.intent else None,
            "events": [{"at": rfc3339(e.at), "event": e.kind, "detail": e.detail} for e in self.events],
            "webhook_events": [{k: plain(v) for k, v in w.items()} for w in self.webhook_events],
        } | steps

    def _later(self) -> tuple[tuple[str, dict[str, Any] | None], ...]:
        return ("fallback", self.fallback), ("step3", self.step3)


class NotFound(LookupError):
    pass


def timeline(db: Database, verification_id: uuid.UUID) -> Timeline:
    row = db.one(_TIMELINE_VERIFICATION, verification_id=verification_id)
    if row is None:
        raise NotFound(f"no verification {verification_id}")
    verification = {
        k: row[k]
        for k in (
            "id",
            "account_id",
            "channel",
            "purpose",
            "locale",
            "status",
            "expires_at",
            "created_at",
            "verified_at",
            "verified_channel",
            "verified_via",
            "redacted_at",
            "superseded_by",
            "confirm_failures",
        )
    }
    verification["destination"] = mask_destination(row["channel"], row["destination"])
    verification["proofs"] = [p.as_json() for p in proofs(row)]
    intent = None
    attempts: list[dict[str, Any]] = []
    if row["intent_id"] is not None:
        intent = {
            "id": row["intent_id"],
            "status": row["intent_status"],
            "template_version": row["template_version"],
            "attempts": row["attempts"],
            "max_attempts": row["max_attempts"],
            "ambiguous_count": row["ambiguous_count"],
            "lease_owner": row["lease_owner"],
            "lease_until": row["lease_until"],
            "lease_version": row["lease_version"],
            "next_attempt_at": row["next_attempt_at"],
            "provider_ref": row["provider_ref"],
            "suppression_reason": row["suppression_reason"],
            "last_error": redact_text(row["last_error"]) if row["last_error"] else None,
            "delivered_at": row["delivered_at"],
            "failed_at": row["failed_at"],
            "reason": failure_reason(row),
        }
        attempts = db.rows(_TIMELINE_ATTEMPTS, intent_id=row["intent_id"])
    result = Timeline(verification, intent)
    later = timeline_fallback.later_steps(db, verification_id)
    result.fallback, result.step3, *_ = [intent for intent, _ in later] + [None, None]
    extra = [Event(*e) for intent, log in later for e in timeline_fallback.events(intent, log)]
    extra += [Event(*e) for e in timeline_reports.events(db, verification_id)]  # provider reports
    result.events = sorted(_events(row, attempts) + extra, key=lambda e: e.at)
    result.webhook_events = _webhook_events(db, row["id"])
    return result


def _proof_phrase(channel: str | None, via: str | None) -> str:
    """How the timeline names a secret: the email's link, or a channel's code."""
    if channel is None or via is None:
        return "the link or code (which was not recorded)"
    return "the email's link" if via == "link" else f"the {'SMS' if channel == 'sms' else channel} code"


# How a verification ended unverified, as the timeline says it.
_ENDINGS = {
    VerificationStatus.EXPIRED: "the link or code expired",
    VerificationStatus.LOCKED: "too many wrong codes",
    VerificationStatus.SUPERSEDED: "replaced by verification {superseded_by}",
}


def _webhook_events(db: Database, verification_id: uuid.UUID) -> list[dict[str, Any]]:
    found = []
    for w in db.rows(_TIMELINE_EVENTS, verification_id=verification_id):
        attempts = w["attempt_log"] if isinstance(w["attempt_log"], list) else []
        for a in attempts:
            a["error_detail"] = redact_text(a["error_detail"]) if a.get("error_detail") else None
        found.append(
            {
                "intent_id": w["id"],
                "type": w["event_type"],
                "webhook_id": webhook_id(verification_id, w["event_type"], w["event_subject"]),
                "subject": w["event_subject"],
                "status": w["status"],
                "attempts": w["attempts"],
                "max_attempts": w["max_attempts"],
                "ambiguous_count": w["ambiguous_count"],
                "next_attempt_at": w["next_attempt_at"] if w["status"] in _WAITING else None,
                "last_error": redact_text(w["last_error"]) if w["last_error"] else None,
                "created_at": w["created_at"],
                "attempt_log": attempts,
            }
        )
    return found


def _events(row: dict[str, Any], attempts: list[dict[str, Any]]) -> list[Event]:
    events = [
        Event(
            row["created_at"],
            "intended",
            f"{row['channel']} to {mask_destination(row['channel'], row['destination'])}, "
            f"{row['purpose']}/{row['locale']}, expires {_clock(row['expires_at'])}"
            + (f"; intent {row['intent_id']} ({row['template_version']})" if row["intent_id"] else ""),
        )
    ]
    seen_claims = set()
    for a in attempts:
        if a["outcome"] == AttemptOutcome.ATTEMPTING:
            if a["claimed_at"] is not None and a["claimed_at"] not in seen_claims:
                seen_claims.add(a["claimed_at"])
                events.append(
                    Event(a["claimed_at"], "claimed", f"by {a['lease_owner']} (lease version {a['lease_version']})")
                )
            events.append(Event(a["attempted_at"] or a["observed_at"], "attempted", f"{_attempt(a)} began"))
        else:
            events.append(Event(a["observed_at"], "observed", _outcome(a)))
    last_claim = row.get("last_claimed_at")
    if last_claim is not None and last_claim not in seen_claims:
        events.append(
            Event(
                last_claim,
                "claimed",
                f"latest claim (lease version {row['lease_version']})"
                + (
                    ""
                    if row["intent_status"] in (IntentStatus.CLAIMED, IntentStatus.ATTEMPTING)
                    else ", released or expired"
                ),
            )
        )
    if row["intent_status"] == IntentStatus.SUPPRESSED and row["completed_at"]:
        events.append(Event(row["completed_at"], "suppressed", f"not sent: verification {row['suppression_reason']}"))
    if row["verified_at"]:
        proof = _proof_phrase(row["verified_channel"], row["verified_via"])
        events.append(Event(row["verified_at"], "verified", f"confirmed with {proof}"))
        for later in proofs(row)[1:]:  # another step's secret, later
            phrase = _proof_phrase(later.channel, later.via)
            at = proved_at(row, later.channel)
            events.append(Event(at, "proved", f"{later.destination} proved too, with {phrase}"))
    elif row["status"] in _ENDINGS:
        detail = _ENDINGS[row["status"]].format(superseded_by=row["superseded_by"])
        events.append(Event(row["updated_at"], row["status"], detail))
    if row["redacted_at"]:
        events.append(Event(row["redacted_at"], "redacted", "destination removed (evidence retention)"))
    return events


def _attempt(a: dict[str, Any]) -> str:
    """`attempt 2 (id 11:2)`: the number, and the attempt id (<intent id>:<attempt number>) the
    provider request carried."""
    return f"attempt {a['attempt_number']} (id {a['attempt_id']})"


def _outcome(a: dict[str, Any]) -> str:
    parts = [f"{_attempt(a)} {a['outcome']}"]
    if a["error_class"]:
        parts.append(f"{a['error_class']}: {redact_text(a['error_detail'] or '')}".rstrip(": "))
    if a["provider_ref"]:
        parts.append(f"provider ref {redact_text(a['provider_ref'])}")
    if a["segments"] and a["outcome"] == AttemptOutcome.ACCEPTED:  # what was billed: only a sent message has segments
        parts.append(f"{a['segments']} segment(s)")
    return "; ".join(parts)


# Intent states with an attempt still to come: only these have a meaningful next_attempt_at.
_WAITING = frozenset({IntentStatus.READY, IntentStatus.RETRYABLE, IntentStatus.AMBIGUOUS})


def delivery_note(
    verification: dict[str, Any], intent: dict[str, Any] | None, *later: dict[str, Any] | None
) -> str | None:
    """What the bare statuses do not say: a pending verification nobody will receive. `later`: the
    later steps' intents (the fallback, step 3), None where there is none."""
    if verification["status"] != VerificationStatus.PENDING or intent is None:
        return None
    ended = (IntentStatus.FAILED, IntentStatus.SUPPRESSED)
    left = next((step for step in later if step is not None and step["status"] not in ended), None)
    if intent["status"] == IntentStatus.FAILED and left is not None:
        step = timeline_fallback.name(left)
        return f"the primary failed for good; the {left['channel']} {step}: {left['why']}"
    if intent["status"] == IntentStatus.FAILED:
        return (
            "delivery failed for good: no message was delivered, none will be sent; the user needs a new verification"
        )
    if intent["status"] == IntentStatus.ACCEPTED:
        return "sent: the provider accepted it; waiting for the user to confirm"
    if intent["status"] == IntentStatus.SUPPRESSED:
        return f"delivery suppressed ({intent['suppression_reason']}): nothing will be sent"
    return None


def render(t: Timeline) -> str:
    v, i = t.verification, t.intent
    note = delivery_note(v, i, t.fallback, t.step3)
    lines = [
        f"verification {v['id']}  {v['channel']}  {v['destination']}  status {v['status']}"
        + (f" ({note})" if note else ""),
        f"  account {v['account_id']}  purpose {v['purpose']}  locale {v['locale']}  "
        f"expires {_clock(v['expires_at'])}  wrong codes {v['confirm_failures']}",
    ]
    for n, p in enumerate(v["proofs"]):  # the first verified it; a second proved the other destination too
        lines.append(
            f"  {'proved' if n == 0 else 'also proved'} by {p['channel']} ({p['via']}) {p['destination']} at "
            f"{p['at']}" + (f": primary channel {v['channel']}" if n == 0 else "")
        )
    if i:
        lease = f"{i['lease_owner']} until {_clock(i['lease_until'])}" if i["lease_owner"] else "-"
        upcoming = f"  next attempt {_clock(i['next_attempt_at'])}" if i["status"] in _WAITING else ""
        lines.append(
            f"  intent {i['id']}  status {i['status']}  attempts {i['attempts']}/{i['max_attempts']}  "
            f"ambiguous {i['ambiguous_count']}  lease {lease}{upcoming}"
        )
        if i["reason"]:
            lines.append(f"  failed: {render_reason(i['reason'])}")
        if i["last_error"]:
            lines.append(f"  last error: {i['last_error']}")
    else:
        lines.append("  no delivery intent")
    lines += [timeline_fallback.render_line(step) for step in (t.fallback, t.step3) if step]
    lines.append("")
    width = max(len(e.kind) for e in t.events)
    lines += [f"{_clock(e.at)}  {e.kind:<{width}}  {e.detail}" for e in t.events]
    lines += _render_webhook_events(t.webhook_events)
    return "\n".join(lines)


def _render_webhook_events(found: list[dict[str, Any]]) -> list[str]:
    if not found:
        return []
    lines = ["", "webhook events"]
    for w in found:
        upcoming = f"  next attempt {_clock(w['next_attempt_at'])}" if w["next_attempt_at"] else ""
        subject = f" ({w['subject']})" if w.get("subject") else ""
        lines.append(
            f"  {w['type']}{subject}  {w['webhook_id']}  intent {w['intent_id']}  status {w['status']}  "
            f"attempts {w['attempts']}/{w['max_attempts']}  ambiguous {w['ambiguous_count']}{upcoming}"
        )
        lines.append(f"    {_clock(w['created_at'])}  recorded")
        for a in w["attempt_log"]:
            error = f"  {a['error_class']}: {a['error_detail'] or ''}".rstrip(": ") if a["error_class"] else ""
            at = _clock(datetime.fromisoformat(a["observed_at"]))
            lines.append(f"    {at}  attempt {a['attempt_id']} {a['outcome']}{error}")
    return lines
