"""SendGrid: the v3 mail-send answers (submission) and the Event Webhook's events (reports).

Submission answers are documented at twilio.com/docs/sendgrid/api-reference/mail-send/errors and
the v3 API's error page (404, 451); events at twilio.com/docs/sendgrid/for-developers/tracking-events/event.

A `bounce` event is read twice, by its `type` and by its `bounce_classification`:
- `type`: `bounce` (the receiving server refused the message for good), `blocked` (it refused us,
  usually our IP's or content's reputation, and SendGrid does not retry it) or, in older payloads,
  `expired` (SendGrid gave up retrying a deferred message);
- `bounce_classification` (SendGrid's bounce and block classifications): whose fault it was. Only
  Invalid Address is the recipient's; Reputation and Content are our sender's towards that
  receiving domain (a route); Mailbox Unavailable, Frequency or Volume Too High and Technical
  Failure blame nobody we can name for good. The classification wins; without one (or with
  Unclassified) the type decides, refined by the SMTP status as the SMTP table reads it.
A report speaks for one receiving server, never for the whole account: no bounce holds the channel.

A `dropped` event is SendGrid refusing to send, for a documented reason: earlier recipient facts,
our account's quota or payload, or our content (its spam checker). Spam reports and unsubscribes
come after delivery: not final, but the recipient asked for no more mail.
"""

from __future__ import annotations

from . import Category, Fault, Rule, Scope, Verdict, at_most, rule
from . import smtp as smtp_table

PROVIDER = "sendgrid"
_EVENTS = "https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/event"
_CLASSES = "https://www.twilio.com/docs/sendgrid/ui/analytics-and-reporting/bounce-and-block-classifications"
_ERRORS = "https://www.twilio.com/docs/sendgrid/api-reference/mail-send/errors"
_V3_ERRORS = "https://www.twilio.com/docs/sendgrid/api-reference/how-to-use-the-sendgrid-v3-api/errors"
R, S, T = Fault.RECIPIENT, Fault.SENDER_OR_ACCOUNT, Fault.TRANSIENT_OR_UNKNOWN
C = Category
ACCOUNT, ROUTE = Scope.ACCOUNT, Scope.ROUTE

# `dropped` reasons: the documented fixed texts, with the short code we store for each.
DROP_REASONS: dict[str, tuple[str, Rule]] = {
    "Bounced Address": (
        "bounced_address",
        rule(True, R, C.BOUNCED, f"{_EVENTS}#dropped", "the address bounced before"),
    ),
    "Unsubscribed Address": (
        "unsubscribed_address",
        rule(True, R, C.UNSUBSCRIBED, f"{_EVENTS}#dropped", "the recipient unsubscribed before"),
    ),
    "Spam Reporting Address": (
        "spam_reporting_address",
        rule(True, R, C.SPAM_REPORTED, f"{_EVENTS}#dropped", "the recipient reported our mail as spam before"),
    ),
    "Invalid": ("invalid", rule(True, R, C.INVALID_DESTINATION, f"{_EVENTS}#dropped", "a malformed address")),
    "Recipient List over Package Quota": (
        "over_quota",
        rule(True, S, C.QUOTA_EXCEEDED, f"{_EVENTS}#dropped", "our account is over its plan's quota", scope=ACCOUNT),
    ),
    "Invalid SMTPAPI header": (
        "invalid_header",
        rule(
            True,
            S,
            C.MESSAGE_REJECTED,
            f"{_EVENTS}#dropped",
            "our request's X-SMTPAPI header is invalid",
            scope=ACCOUNT,
        ),
    ),
    "Spam Content": (
        "spam_content",
        rule(
            True, S, C.MESSAGE_REJECTED, f"{_EVENTS}#dropped", "SendGrid's spam checker flagged this message's content"
        ),
    ),
}
DROPPED_OTHER = rule(True, T, C.UNKNOWN, f"{_EVENTS}#dropped", "a drop reason SendGrid does not document")

# A bounce event's `type`: what the receiving server (or SendGrid) did.
BOUNCE_TYPES: dict[str, Rule] = {
    "bounce": rule(True, R, C.BOUNCED, f"{_EVENTS}#bounce", "type bounce: the receiving server refused it for good"),
    "blocked": rule(
        True,
        S,
        C.BLOCKED,
        f"{_EVENTS}#bounce",
        "type blocked: a receiving server refused us (reputation, content); not retried",
        scope=ROUTE,
    ),
    "expired": rule(
        True, T, C.UNKNOWN, f"{_EVENTS}#bounce", "type expired: SendGrid stopped retrying a deferred message"
    ),
}
# A bounce event's `bounce_classification`: whose fault SendGrid says it was ("Unclassified": none).
BOUNCE_CLASSIFICATIONS: dict[str, Rule] = {
    "Invalid Address": rule(True, R, C.BOUNCED, _CLASSES, "the address is malformed or the mailbox does not exist"),
    "Mailbox Unavailable": rule(True, T, C.UNREACHABLE, _CLASSES, "the mailbox is full, disabled or unavailable"),
    "Reputation": rule(
        True, S, C.BLOCKED, _CLASSES, "the receiving domain refused our sending reputation", scope=ROUTE
    ),
    "Content": rule(True, S, C.BLOCKED, _CLASSES, "the receiving domain's filter refused our content", scope=ROUTE),
    "Frequency or Volume Too High": rule(
        True, S, C.RATE_LIMITED, _CLASSES, "the receiving domain throttled our volume"
    ),
    "Technical Failure": rule(True, T, C.UNKNOWN, _CLASSES, "a technical failure on the way (DNS, connection)"),
}
EVENTS: dict[str, Rule] = {
    "spamreport": rule(False, R, C.SPAM_REPORTED, f"{_EVENTS}#spam-report", "the recipient marked it as spam"),
    "unsubscribe": rule(False, R, C.UNSUBSCRIBED, f"{_EVENTS}#unsubscribe", "the recipient unsubscribed"),
    "group_unsubscribe": rule(
        False, R, C.UNSUBSCRIBED, f"{_EVENTS}#group-unsubscribe", "the recipient unsubscribed from the group"
    ),
}

# Submission refusals (the answer to POST /v3/mail/send), by what the 400 is about or the status.
SUBMISSION: dict[str, Rule] = {
    "400 personalizations": rule(True, R, C.INVALID_DESTINATION, _ERRORS, "an error on the recipient field"),
    "400 from": rule(True, S, C.SENDER_MISCONFIGURED, _ERRORS, "the sender identity", scope=ACCOUNT),
    "400": rule(True, S, C.MESSAGE_REJECTED, _ERRORS, "any other field of our payload"),
    "401": rule(True, S, C.SENDER_MISCONFIGURED, _ERRORS, "the API key", scope=ACCOUNT),
    "403": rule(True, S, C.SENDER_MISCONFIGURED, _ERRORS, "the key's permissions", scope=ACCOUNT),
    "404": rule(True, S, C.SENDER_MISCONFIGURED, _ERRORS, "not found: our SENDGRID_API_URL or resource", scope=ACCOUNT),
    "406": rule(True, S, C.SENDER_MISCONFIGURED, _V3_ERRORS, "our Accept header", scope=ACCOUNT),
    "413": rule(True, S, C.MESSAGE_REJECTED, _ERRORS, "the message is too large"),
    "415": rule(True, S, C.SENDER_MISCONFIGURED, _ERRORS, "our Content-Type", scope=ACCOUNT),
    "451": rule(
        True,
        S,
        C.SENDER_MISCONFIGURED,
        _V3_ERRORS,
        "unavailable due to data residency: the key's region and the API host differ",
        scope=ACCOUNT,
    ),
}


def bounce_rule(kind: str, classification: str | None, status: str | None) -> Rule:
    """A bounce event's row: its classification's, else its type's refined by its SMTP status (a full
    mailbox or a policy refusal is not the address's fault). Never wider than a route."""
    found = BOUNCE_CLASSIFICATIONS.get(classification or "")
    if found is None:
        found = BOUNCE_TYPES.get(kind, BOUNCE_TYPES["bounce"])
        refined = smtp_table.bounce_rule(status) if kind == "bounce" and status else None
        found = refined or found
    return at_most(found, Scope.ROUTE)


def event_verdict(
    event: str,
    smtp_status: str | None = None,
    drop_reason: str | None = None,
    *,
    bounce_type: str | None = None,
    classification: str | None = None,
) -> Verdict | None:
    """A kept event's verdict, or None for events that are no failure (processed, delivered, deferred).
    A bounce's code is its SMTP status (else its type); a drop's its reason's short code."""
    if event == "dropped":
        code, found = DROP_REASONS.get(drop_reason or "", ("other", DROPPED_OTHER))
        return Verdict.of(found, PROVIDER, code)
    if event == "bounce":
        kind = bounce_type if bounce_type in BOUNCE_TYPES else "bounce"
        return Verdict.of(bounce_rule(kind, classification, smtp_status), PROVIDER, smtp_status or kind)
    listed = EVENTS.get(event)
    return None if listed is None else Verdict.of(listed, PROVIDER, event)


def submission_verdict(status: int, about: str | None = None) -> Verdict:
    """A refused submission; `about`: 'personalizations' or 'from' when a 400's errors name that field."""
    key = f"{status} {about}" if status == 400 and about else str(status)
    return Verdict.of(SUBMISSION.get(key, SUBMISSION["400"]), PROVIDER, str(status))
