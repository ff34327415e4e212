"""Provider delivery reports: SendGrid events and Twilio status callbacks as observations.

Each report is classified by its provider's table (delivery/classification/): will the message
ever arrive (`final`), whose fault it is, which reason the site reads. A verified batch then goes
to `ingest_delivery_reports` in one round trip and one transaction, whatever
its size; the SQL acts on those answers and never re-derives them. Signatures are checked before
anything here runs (api/report_signatures.py). Nothing a provider writes freely is kept (a bounce
`reason` quotes the address): the event, its classification, an SMTP status or Twilio code, and the
references.

One event that cannot be read (not an object, a field that is not text) is skipped and counted as
`malformed`; text PostgreSQL cannot hold (NUL, a lone UTF-16 surrogate) is replaced by U+FFFD, and
every kept field is bounded: the rest of the batch is always stored.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

from ..outbox.config import FailurePolicy
from ..platform.catalogue import catalogue
from ..platform.database import Database
from .classification import Verdict
from .classification import sendgrid as sendgrid_table
from .classification import twilio as twilio_table
from .classification import twilio_voice as voice_table
from .classification import twilio_whatsapp as whatsapp_table

_SQL = catalogue("delivery")

_INGEST = _SQL["reports_ingest"]

# SendGrid's deliverability and engagement events we keep; others (open, click, group_resubscribe,
# ...) are ignored.
SENDGRID_EVENTS = frozenset(
    {"processed", "delivered", "deferred", "bounce", "dropped", "spamreport", "unsubscribe", "group_unsubscribe"}
)
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
TWILIO_FINAL_FAILURES = frozenset({"undelivered", "failed"})
# A call's status callback (CallStatus) and answering machine detection's result (AnsweredBy): the
# voice table's, with the answers it does not list (a person, or none detection could reach)
CALL_STATUSES = voice_table.NOT_FINAL | {"completed"} | voice_table.CALL_STATUSES.keys()
ANSWERED_BY = voice_table.ANSWERED_BY.keys() | {"human", "unknown"}
ANSWERED = "answered"  # the event of the asynchronous detection's callback
_SMTP_STATUS = re.compile(r"^[245]\.\d{1,3}\.\d{1,3}$")
_SID = re.compile(r"^(SM|MM)[0-9a-fA-F]{32}$")
_CALL_SID = re.compile(r"^CA[0-9a-fA-F]{32}$")
_ATTEMPT_ID = re.compile(r"^(\d{1,18}):\d{1,9}$")
_WORD = re.compile(r"^[a-z_]{1,32}$")
_WORDS = re.compile(r"[^a-z]+")
_UNREPRESENTABLE = re.compile("[\x00\ud800-\udfff]")  # NUL and lone surrogates: PostgreSQL text refuses both


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
    permanent: bool = False  # final: the message will never arrive
    fault: str | None = None  # recipient | sender_or_account | transient_or_unknown (None: no failure)
    category: str | None = None
    code: str | None = None  # the reason's provider code
    scope: str | None = None  # account | route | message: what the fault may hold (None: no failure)
    provider_at: str | None = None  # ISO-8601 UTC
    provider: str | None = None  # the reason's provider (the sending one); None: the reporting one

    @classmethod
    def classified(cls, verdict: Verdict | None, **fields: Any) -> Observation:
        if verdict is None:
            return cls(**fields)
        return cls(**fields, permanent=verdict.final, fault=verdict.fault.value, category=verdict.category.value,
                   code=verdict.code, scope=verdict.scope.value)  # fmt: skip


@dataclass(frozen=True)
class IngestResult:
    received: int
    stored: int
    duplicates: int
    unknown: int  # no attempt of ours matches its references: answered 200 so the provider stops
    delivered: int
    undeliverable: int
    suppressed: int
    sender_faults: int = 0  # faults of our account reported (they page)
    held: int = 0  # channels this batch put on hold
    route_faults: int = 0  # faults of our sender towards one route (a country, a receiving domain)
    routes_held: int = 0  # routes this batch put on hold
    ignored: int = 0  # events we do not keep (engagement events)
    malformed: int = 0  # events that could not be read: skipped, the rest stored

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class MalformedReport(ValueError):
    """The whole body is not what the provider sends (400); single odd events are only skipped."""


def clean(value: str, limit: int) -> str:
    """Text as PostgreSQL can hold it, bounded: NUL and lone surrogates become U+FFFD."""
    return _UNREPRESENTABLE.sub("\ufffd", value[:limit])


@dataclass(frozen=True)
class SendGridBatch:
    observations: list[Observation]
    ignored: int
    malformed: int


def sendgrid_events(body: bytes, sent_through: str = "sendgrid") -> SendGridBatch:
    """The batch's observations; MalformedReport if the body is not a JSON array. `sent_through`: the
    provider their reasons name, `smtp` for mail relayed over SMTP (DeliveryReportsConfig.email_provider)."""
    try:
        events = json.loads(body.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        raise MalformedReport("The body is not valid JSON.") from None
    if not isinstance(events, list):
        raise MalformedReport("The body must be a JSON array of events.")
    kept, ignored, malformed = [], 0, 0
    for event in events:
        if not isinstance(event, dict) or not isinstance(event.get("event"), str):
            malformed += 1
        elif event["event"] not in SENDGRID_EVENTS:
            ignored += 1
        else:
            kept.append(sendgrid_observation(event, sent_through))
    return SendGridBatch(kept, ignored, malformed)


def sendgrid_observation(event: Mapping[str, Any], sent_through: str = "sendgrid") -> Observation:
    name = str(event["event"])
    detail: str | None = None
    status = str(event.get("status") or "")
    status = status if _SMTP_STATUS.match(status) else ""
    kind = classification = None
    if name == "bounce":
        given, listed = event.get("type"), event.get("bounce_classification")  # any JSON value: never trusted
        kind = given if isinstance(given, str) and given in sendgrid_table.BOUNCE_TYPES else "bounce"
        classification = listed if isinstance(listed, str) and listed in sendgrid_table.BOUNCE_CLASSIFICATIONS else None
        detail = " ".join(p for p in (kind, status, classification and _WORDS.sub("_", classification.lower())) if p)
    drop_reason = event.get("reason") if name == "dropped" and isinstance(event.get("reason"), str) else None
    verdict = sendgrid_table.event_verdict(
        name, status or None, drop_reason, bounce_type=kind, classification=classification
    )
    if kind == "blocked":
        name = "blocked"
    if name == "dropped" and verdict is not None:
        detail = verdict.code
    intent_id, attempt_id = _custom_args(event)
    message_id = event.get("sg_message_id")
    provider_ref = clean(message_id.split(".", 1)[0], 200) if isinstance(message_id, str) and message_id else None
    event_id = event.get("sg_event_id")
    if isinstance(event_id, str) and 0 < len(event_id) <= 300 and not _UNREPRESENTABLE.search(event_id):
        dedup = event_id
    else:  # not documented as optional, but a retried batch must still be one row per event
        dedup = "sha256:" + hashlib.sha256(json.dumps(event, sort_keys=True).encode()).hexdigest()
    return Observation.classified(
        verdict,
        dedup_key=dedup,
        event=name,
        intent_id=intent_id,
        attempt_id=attempt_id,
        provider_ref=provider_ref,
        detail=detail,
        provider_at=_unix(event.get("timestamp")),
        provider=sent_through,
    )


def _custom_args(event: Mapping[str, Any]) -> tuple[int | None, str | None]:
    """Our custom_args (delivery/channels/sendgrid.py) come back as top-level event fields."""
    attempt_id = event.get("attempt_id")
    match = _ATTEMPT_ID.match(attempt_id) if isinstance(attempt_id, str) else None
    if match is None or str(event.get("intent_id")) != match.group(1):
        return None, None
    return int(match.group(1)), attempt_id


def twilio_observation(form: Mapping[str, str]) -> Observation:
    """A status callback's observation: a message's (MessageSid) or a call's (CallSid, call_observation);
    MalformedReport when it is neither, or its sid or status is not valid."""
    if "MessageSid" not in form and "SmsSid" not in form and "CallSid" in form:
        return call_observation(form)
    sid, status = form.get("MessageSid") or form.get("SmsSid") or "", form.get("MessageStatus") or ""
    if not _SID.match(sid):
        raise MalformedReport("MessageSid is missing or not a message sid.")
    if status not in TWILIO_STATUSES:
        raise MalformedReport("MessageStatus is missing or unknown.")
    code = _int(form.get("ErrorCode"))
    # A WhatsApp message's callback names its channel (ChannelPrefix, the whatsapp: address): the 63xxx table
    whatsapp = form.get("ChannelPrefix") == "whatsapp" or (form.get("To") or "").startswith("whatsapp:")
    table = whatsapp_table if whatsapp else twilio_table
    verdict = table.verdict(code) if status in TWILIO_FINAL_FAILURES else None
    return Observation.classified(
        verdict,
        dedup_key=f"{sid}:{status}",
        event=status,
        provider_ref=sid,
        detail=verdict.category.value if verdict else None,
        error_code=code,
    )


def call_observation(form: Mapping[str, str]) -> Observation:
    """A call's report (delivery/classification/twilio_voice.py). Two kinds reach the same URL:
    * the call's status callback (`CallStatus`; Twilio sends `completed`, `busy`, `no-answer`,
      `failed` or `canceled` once the call ends): a call answered by a person (or by someone
      detection could not tell) is stored as `delivered` (the code was read to them); the others are
      final failures, stored under their status (`no-answer` as `no_answer`), with `AnsweredBy` as
      their detail when the callback carries it;
    * answering machine detection's own callback (`AnsweredBy`, no final `CallStatus`), stored as
      `answered` with the result as its detail: final for a machine or a fax (`ends_call` then
      names the call to hang up), an observation only for a person or `unknown`.
    One row per call and status (or per call's detection result): a replay is a duplicate."""
    sid, status, by = form.get("CallSid") or "", form.get("CallStatus") or "", form.get("AnsweredBy") or None
    if not _CALL_SID.match(sid):
        raise MalformedReport("CallSid is not a call sid.")
    if by is not None and by not in ANSWERED_BY:
        raise MalformedReport("AnsweredBy is not a detection result.")
    if status and status not in CALL_STATUSES:
        raise MalformedReport("CallStatus is unknown.")
    code = _int(form.get("ErrorCode"))
    if by is not None and (not status or status in voice_table.NOT_FINAL):  # the call goes on: detection's
        verdict = voice_table.answered(by)
        return Observation.classified(verdict, dedup_key=f"{sid}:{ANSWERED}", event=ANSWERED, provider_ref=sid,
                                      detail=by)  # fmt: skip
    if not status:
        raise MalformedReport("CallStatus or AnsweredBy is missing.")
    outcome, verdict = voice_table.observed(status, by, code)
    event = "delivered" if outcome == "delivered" else status.replace("-", "_")
    detail = " ".join(p for p in ("completed" if outcome == "delivered" else None, by) if p) or None
    return Observation.classified(
        verdict, dedup_key=f"{sid}:{status}", event=event, provider_ref=sid, detail=detail, error_code=code
    )


def callback_attempt(observation: Observation, query: str) -> Observation:
    """The observation linked to the attempt its signed StatusCallback URL names (`attempt=<intent>:<n>`,
    delivery/channels/twilio.py), so it links whether or not the send is settled yet; as it was when the
    URL names none or not one attempt (a message sent before the URL named it: linked by its sid)."""
    try:
        values = parse_qs(query, max_num_fields=10).get("attempt", [])
    except ValueError:
        return observation
    match = _ATTEMPT_ID.match(values[0]) if len(values) == 1 else None
    if match is None:
        return observation
    return replace(observation, intent_id=int(match.group(1)), attempt_id=values[0])


def ends_call(observation: Observation) -> str | None:
    """The call to hang up: one a machine or a fax answered, as detection reported while it goes on."""
    if observation.event == ANSWERED and observation.permanent and observation.provider_ref:
        return observation.provider_ref
    return None


def ingest(
    db: Database, provider: str, observations: Sequence[Observation], failures: FailurePolicy | None = None,
    ignored: int = 0, malformed: int = 0,
) -> IngestResult:  # fmt: skip
    """One batch, one statement: stored once, linked to attempts, effects applied (ingest_delivery_reports)."""
    if provider not in ("sendgrid", "twilio"):
        raise ValueError(provider)
    events = [
        {k: clean(v, 300) if isinstance(v, str) else v for k, v in asdict(o).items()}
        for o in observations
        if _WORD.match(o.event)
    ]
    row = db.single(_INGEST, provider=provider, events=json.dumps(events), **(failures or FailurePolicy()).parameters())
    return IngestResult(
        **{k: int(v) for k, v in row.items()},
        ignored=ignored + len(observations) - len(events),
        malformed=malformed,
    )


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
