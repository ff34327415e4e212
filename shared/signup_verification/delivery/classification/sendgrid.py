"""SendGrid: the v3 mail-send answers (submission) and the Event Webhook's events (reports).

Submission answers are documented at twilio.com/docs/sendgrid/api-reference/mail-send/errors;
events at twilio.com/docs/sendgrid/for-developers/tracking-events/event. A `bounce` event is the
receiving server's permanent refusal (`type` bounce) or a block (`type` blocked: the receiving
server refused us, usually our IP's or content's reputation, and SendGrid does not retry it); a
`dropped` event is SendGrid refusing to send, for one of six documented reasons, two of which are
our account's or payload's fault. Spam reports and unsubscribes come after delivery: not final,
but the recipient asked for no more mail.
"""

from __future__ import annotations

from . import Category, Fault, Rule, Verdict, rule
from . import smtp as smtp_table

PROVIDER = "sendgrid"
_EVENTS = "https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/event"
_ERRORS = "https://www.twilio.com/docs/sendgrid/api-reference/mail-send/errors"
R, S, T = Fault.RECIPIENT, Fault.SENDER_OR_ACCOUNT, Fault.TRANSIENT_OR_UNKNOWN
C = Category

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
        rule(
            True, S, C.QUOTA_EXCEEDED, f"{_EVENTS}#dropped", "our account is over its plan's quota", holds_channel=True
        ),  # fmt: skip
    ),
    "Invalid SMTPAPI header": (
        "invalid_header",
        rule(
            True,
            S,
            C.MESSAGE_REJECTED,
            f"{_EVENTS}#dropped",
            "our request's X-SMTPAPI header is invalid",
            holds_channel=True,
        ),  # fmt: skip
    ),
}
DROPPED_OTHER = rule(True, T, C.UNKNOWN, f"{_EVENTS}#dropped", "a drop reason SendGrid does not document")

EVENTS: dict[str, Rule] = {
    "bounce": rule(True, R, C.BOUNCED, f"{_EVENTS}#bounce", "type bounce: the receiving server refused it for good"),
    "blocked": rule(
        True,
        S,
        C.BLOCKED,
        f"{_EVENTS}#bounce",
        "type blocked: a receiving server refused us (reputation, content); not retried",
    ),  # fmt: skip
    "spamreport": rule(False, R, C.SPAM_REPORTED, f"{_EVENTS}#spam-report", "the recipient marked it as spam"),
    "unsubscribe": rule(False, R, C.UNSUBSCRIBED, f"{_EVENTS}#unsubscribe", "the recipient unsubscribed"),
    "group_unsubscribe": rule(
        False, R, C.UNSUBSCRIBED, f"{_EVENTS}#group-unsubscribe", "the recipient unsubscribed from the group"
    ),  # fmt: skip
}

# Submission refusals (the answer to POST /v3/mail/send), by what the 400 is about or the status.
SUBMISSION: dict[str, Rule] = {
    "400 personalizations": rule(True, R, C.INVALID_DESTINATION, _ERRORS, "an error on the recipient field"),
    "400 from": rule(True, S, C.SENDER_MISCONFIGURED, _ERRORS, "the sender identity", holds_channel=True),
    "400": rule(True, S, C.MESSAGE_REJECTED, _ERRORS, "any other field of our payload"),
    "401": rule(True, S, C.SENDER_MISCONFIGURED, _ERRORS, "the API key", holds_channel=True),
    "403": rule(True, S, C.SENDER_MISCONFIGURED, _ERRORS, "the key's permissions", holds_channel=True),
    "406": rule(True, S, C.SENDER_MISCONFIGURED, _ERRORS, "our Accept header", holds_channel=True),
    "413": rule(True, S, C.MESSAGE_REJECTED, _ERRORS, "the message is too large"),
    "415": rule(True, S, C.SENDER_MISCONFIGURED, _ERRORS, "our Content-Type", holds_channel=True),
}


def event_verdict(event: str, smtp_status: str | None = None, drop_reason: str | None = None) -> Verdict | None:
    """A kept event's verdict, or None for events that are no failure (processed, delivered, deferred).
    A bounce's SMTP status refines it as the SMTP table does (5.2.2 mailbox full is no one's fault,
    5.7.x a policy refusal of us); its code is that status."""
    if event == "dropped":
        code, found = DROP_REASONS.get(drop_reason or "", ("other", DROPPED_OTHER))
        return Verdict.of(found, PROVIDER, code)
    listed = EVENTS.get(event)
    if listed is None:
        return None
    refined = smtp_table.bounce_rule(smtp_status) if event == "bounce" and smtp_status else None
    return Verdict.of(refined or listed, PROVIDER, smtp_status if event in ("bounce", "blocked") else event)


def submission_verdict(status: int, about: str | None = None) -> Verdict:
    """A refused submission; `about`: 'personalizations' or 'from' when a 400's errors name that field."""
    key = f"{status} {about}" if status == 400 and about else str(status)
    return Verdict.of(SUBMISSION.get(key, SUBMISSION["400"]), PROVIDER, str(status))
