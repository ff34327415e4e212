"""Provider delivery reports (issue 13): SendGrid events and Twilio status callbacks as observations.

This module knows what each provider's report means (which event is final, which code permanent)
and hands a verified batch to `ingest_delivery_reports` (sql/definitions/13): one round trip, one
transaction, whatever the batch size. Signatures are checked before anything here runs
(api/report_signatures.py). Nothing a provider writes freely is kept (a bounce `reason` quotes the
address): the event, its classification, an SMTP status or Twilio code, and the references.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from ..platform.database import Database, load_sql

_INGEST = load_sql(__file__, "reports_ingest.sql")

# SendGrid's deliverability and engagement events we keep; others (group_resubscribe, ...) are ignored.
SENDGRID_EVENTS = frozenset(
    {"processed", "delivered", "deferred", "bounce", "dropped", "spamreport", "unsubscribe", "group_unsubscribe"}
)
# SendGrid's documented `dropped` reasons (fixed texts, never an address); anything else is 'other'.
DROP_REASONS = {
    "Bounced Address": "bounced_address",
    "Invalid": "invalid",
    "Invalid SMTPAPI header": "invalid_header",
    "Spam Reporting Address": "spam_reporting_address",
    "Unsubscribed Address": "unsubscribed_address",
    "Recipient List over Package Quota": "over_quota",
}
TWILIO_STATUSES = frozenset(
    {
        "accepted",
        "scheduled",
        "queued",
        "sending",
        "sent",
        "delivered",
        "undelivered",
        "failed",
        "canceled",
        "read",
        "partially_delivered",
    }  # fmt: skip
)
# Twilio delivery error codes that say this number will not receive SMS (twilio.com/docs/api/errors):
# the destination goes on the suppression list. Others (30001 queue overflow, 30003 handset off,
# 30008 unknown, carrier filtering 30007, the account's 30002/30034) are not the destination's fault.
TWILIO_PERMANENT = {
    21211: "invalid_destination",
    21610: "unsubscribed",
    21612: "unreachable_destination",
    21614: "not_mobile",
    30004: "blocked_by_recipient",
    30005: "unknown_destination",
    30006: "landline_or_unreachable_carrier",
}
_SMTP_STATUS = re.compile(r"^[245]\.\d{1,3}\.\d{1,3}$")
_SID = re.compile(r"^(SM|MM)[0-9a-fA-F]{32}$")
_ATTEMPT_ID = re.compile(r"^(\d{1,18}):\d{1,9}$")
_WORD = re.compile(r"^[a-z_]{1,32}$")


@dataclass(frozen=True)
class Observation:
    """One provider event as stored: references to link it, what it says, never free text."""

    dedup_key: str
    event: str
    intent_id: int | None = None
    attempt_id: str | None = None
    provider_ref: str | None = None
    detail: str | None = None
    error_code: int | None = None
    permanent: bool = False
    provider_at: str | None = None  # ISO-8601 UTC


@dataclass(frozen=True)
class IngestResult:
    received: int
    stored: int
    duplicates: int
    unknown: int  # no attempt of ours matches its references: answered 200 so the provider stops
    delivered: int
    undeliverable: int
    suppressed: int
    ignored: int = 0  # events we do not keep (engagement, malformed single events)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class MalformedReport(ValueError):
    """The whole body is not what the provider sends (400); single odd events are only ignored."""


def sendgrid_events(body: bytes) -> tuple[list[Observation], int]:
    """The batch's observations and how many events were ignored; MalformedReport if not a JSON array."""
    try:
        events = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise MalformedReport("The body is not valid UTF-8 JSON.") from None
    if not isinstance(events, list):
        raise MalformedReport("The body must be a JSON array of events.")
    kept = [o for o in (sendgrid_observation(e) for e in events) if o is not None]
    return kept, len(events) - len(kept)


def sendgrid_observation(event: Any) -> Observation | None:
    if not isinstance(event, dict) or not isinstance(event.get("event"), str) or event["event"] not in SENDGRID_EVENTS:
        return None
    name = str(event["event"])
    detail, permanent = None, False
    if name == "bounce":
        kind = str(event["type"]) if event.get("type") in ("bounce", "blocked") else "bounce"
        status = str(event.get("status") or "")
        detail = kind + (f" {status}" if _SMTP_STATUS.match(status) else "")
        # type 'blocked' is SendGrid's soft bounce (a temporary refusal): an observation only
        name, permanent = ("blocked", False) if kind == "blocked" else ("bounce", True)
    elif name == "dropped":
        detail, permanent = DROP_REASONS.get(str(event.get("reason") or ""), "other"), True
    intent_id, attempt_id = _custom_args(event)
    message_id = event.get("sg_message_id")
    provider_ref = message_id.split(".", 1)[0][:200] if isinstance(message_id, str) and message_id else None
    event_id = event.get("sg_event_id")
    if isinstance(event_id, str) and 0 < len(event_id) <= 300:
        dedup = event_id
    else:  # not documented as optional, but a retried batch must still be one row per event
        dedup = "sha256:" + hashlib.sha256(json.dumps(event, sort_keys=True).encode()).hexdigest()
    return Observation(
        dedup_key=dedup,
        event=name,
        intent_id=intent_id,
        attempt_id=attempt_id,
        provider_ref=provider_ref,
        detail=detail,
        permanent=permanent,
        provider_at=_unix(event.get("timestamp")),
    )


def _custom_args(event: Mapping[str, Any]) -> tuple[int | None, str | None]:
    """Our custom_args (delivery/channels/sendgrid.py) come back as top-level event fields."""
    attempt_id = event.get("attempt_id")
    match = _ATTEMPT_ID.match(attempt_id) if isinstance(attempt_id, str) else None
    if match is None or str(event.get("intent_id")) != match.group(1):
        return None, None
    return int(match.group(1)), attempt_id


def twilio_observation(form: Mapping[str, str]) -> Observation:
    """A status callback's observation; MalformedReport without a valid MessageSid and MessageStatus."""
    sid, status = form.get("MessageSid") or form.get("SmsSid") or "", form.get("MessageStatus") or ""
    if not _SID.match(sid):
        raise MalformedReport("MessageSid is missing or not a message sid.")
    if status not in TWILIO_STATUSES:
        raise MalformedReport("MessageStatus is missing or unknown.")
    code = _int(form.get("ErrorCode"))
    permanent = status in ("undelivered", "failed") and code in TWILIO_PERMANENT
    return Observation(
        dedup_key=f"{sid}:{status}",
        event=status,
        provider_ref=sid,
        detail=TWILIO_PERMANENT.get(code) if permanent and code is not None else None,
        error_code=code,
        permanent=permanent,
    )


def ingest(db: Database, provider: str, observations: Sequence[Observation], suppress_days: float | None,
           ignored: int = 0) -> IngestResult:  # fmt: skip
    """One batch, one statement: stored once, linked to attempts, effects applied (sql/definitions/13)."""
    if provider not in ("sendgrid", "twilio"):
        raise ValueError(provider)
    # PostgreSQL text cannot hold NUL: a signed body may still carry one (found by the fuzz test)
    events = [
        {k: v.replace("\x00", "\ufffd") if isinstance(v, str) else v for k, v in asdict(o).items()}
        for o in observations
        if _WORD.match(o.event)
    ]
    row = db.run(_INGEST, provider=provider, events=json.dumps(events),
                 suppress_seconds=None if suppress_days is None else suppress_days * 86400.0)[0]  # fmt: skip
    received, stored, duplicates, unknown, delivered, undeliverable, suppressed = (int(v) for v in row)
    return IngestResult(received, stored, duplicates, unknown, delivered, undeliverable, suppressed,
                        ignored=ignored + len(observations) - len(events))  # fmt: skip


def _unix(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 2**33:
        return None
    return datetime.fromtimestamp(value, UTC).isoformat()


def _int(value: str | None) -> int | None:
    """A provider's integer field, or None when absent, malformed or beyond the integer column."""
    try:
        number = int(value) if value else None
    except ValueError:
        return None
    return number if number is not None and -(2**31) <= number < 2**31 else None
