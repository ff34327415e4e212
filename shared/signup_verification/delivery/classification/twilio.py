"""Twilio's error codes: at submission (the Messages API's 400 answers) and in status callbacks
(`undelivered` / `failed` with `ErrorCode`). One table for both: Twilio uses the same codes in
either place, and a failed message never arrives (Twilio does not retry it). A row that is not
final (21611: the sender's queue is full) is retried later at submission and only observed in a
callback.

Each row cites twilio.com/docs/api/errors/<code>, and has a scope (classification/__init__.py):
- account: credentials, the account (suspended, its daily limit), a From number that is not ours or
  cannot send at all: every message meets it;
- route: our sender towards the destination's country (21606, 21659: a sender or short code that
  cannot reach this destination; 21612: this combination of To and From; 21408: a region not
  enabled; 21608: a trial account's unverified destinations; 30007: carrier filtering, which one
  carrier applies and another does not; 30024: a sender not provisioned on the carrier; 30023,
  30032, 30034: US (T-Mobile) registration and caps; 30450: pumping protection on that
  destination). Twilio's answers name no carrier, so the country is the finest route they give;
- message: the recipient (21211, 21610, 21614, 21635, 30005, ...), the content, or a passing
  condition (30003 handset off, 30410 provider timeout, 30036 the validity period ran out). 30004
  and 30006 are not always the recipient's (carrier filtering; a short code that cannot reach the
  carrier): nobody's we can name, so nothing is suppressed for them.
A code that is not here, on an undelivered or failed callback, is final with an unknown cause:
never the recipient's fault, so never suppressed, and holding nothing.
"""

from __future__ import annotations

from . import Category, Fault, Rule, Scope, Verdict, rule

PROVIDER = "twilio"
_DOCS = "https://www.twilio.com/docs/api/errors/"
R, S, T = Fault.RECIPIENT, Fault.SENDER_OR_ACCOUNT, Fault.TRANSIENT_OR_UNKNOWN
C = Category
ACCOUNT, ROUTE, MESSAGE = Scope.ACCOUNT, Scope.ROUTE, Scope.MESSAGE


def row(
    code: int, fault: Fault, category: Category, meaning: str, scope: Scope = MESSAGE, *, final: bool = True
) -> tuple[int, Rule]:
    return code, rule(final, fault, category, f"{_DOCS}{code}", meaning, scope=scope)


ERRORS: dict[int, Rule] = dict(
    [
        # credentials and the account: every message fails
        row(20003, S, C.SENDER_MISCONFIGURED, "Authentication Error", ACCOUNT),
        row(20404, S, C.SENDER_MISCONFIGURED, "The requested resource was not found", ACCOUNT),
        # the request: To, From, Body
        row(21211, R, C.INVALID_DESTINATION, "Invalid 'To' Phone Number"),
        row(21212, S, C.SENDER_MISCONFIGURED, "Invalid 'From' Phone Number", ACCOUNT),
        row(21265, R, C.INVALID_DESTINATION, "'To' number cannot be a Short Code"),
        row(21266, R, C.INVALID_DESTINATION, "'To' and 'From' numbers cannot be the same"),
        row(21408, S, C.REGION_NOT_PERMITTED, "Permission to send an SMS not enabled for the region", ROUTE),
        row(21603, S, C.SENDER_MISCONFIGURED, "'From' phone number is required", ACCOUNT),
        row(21604, S, C.MESSAGE_REJECTED, "'To' number is required (or the request is not form-encoded)", ACCOUNT),
        row(21606, S, C.SENDER_MISCONFIGURED, "'From' is not a message-capable number for this destination", ROUTE),
        row(21608, S, C.SENDER_MISCONFIGURED, "Trial account: the 'To' number is not verified", ROUTE),
        row(21610, R, C.UNSUBSCRIBED, "Attempt to send to unsubscribed recipient (replied STOP)"),
        row(
            21611, S, C.RATE_LIMITED, "'From' exceeded its queue (10 h of messages): retry later", ACCOUNT, final=False
        ),
        row(21612, S, C.SENDER_MISCONFIGURED, "Not sendable with this combination of 'To' and 'From'", ROUTE),
        row(21614, R, C.NOT_MOBILE, "'To' number is not a valid mobile number"),
        row(21617, S, C.MESSAGE_REJECTED, "The concatenated message body exceeds the 1600 character limit"),
        row(21635, R, C.NOT_MOBILE, "'To' number cannot be a landline"),
        row(21659, S, C.SENDER_MISCONFIGURED, "'From' is not a Twilio number, or short code country mismatch", ROUTE),
        row(21660, S, C.SENDER_MISCONFIGURED, "Mismatch between the 'From' number and the account", ACCOUNT),
        row(21661, S, C.SENDER_MISCONFIGURED, "'From' number is not SMS-capable", ACCOUNT),
        # delivery (status callbacks)
        row(30001, S, C.RATE_LIMITED, "Queue overflow: sent faster than the sender's rate"),
        row(30002, S, C.SENDER_MISCONFIGURED, "Account suspended", ACCOUNT),
        row(30003, T, C.UNREACHABLE, "Unreachable destination handset (off, no signal): not the number's fault"),
        row(30004, T, C.BLOCKED, "Message blocked: opted out, or carrier or compliance filtering"),
        row(30005, R, C.INVALID_DESTINATION, "Unknown destination handset (inactive number)"),
        row(30006, T, C.NOT_MOBILE, "Landline, or a carrier the sender (a short code) cannot reach"),
        row(30007, S, C.CARRIER_FILTERED, "Message filtered by Twilio or the carrier: our content or sender", ROUTE),
        row(30008, T, C.UNKNOWN, "Unknown error"),
        row(30022, S, C.RATE_LIMITED, "US A2P 10DLC: rate limits exceeded"),
        row(30023, S, C.QUOTA_EXCEEDED, "US A2P 10DLC: daily message cap reached (T-Mobile, per brand)", ROUTE),
        row(30024, S, C.SENDER_MISCONFIGURED, "Numeric Sender ID not provisioned on the carrier", ROUTE),
        row(30032, S, C.SENDER_MISCONFIGURED, "Toll-free number has not been verified (US and Canada)", ROUTE),
        row(30034, S, C.SENDER_MISCONFIGURED, "US A2P 10DLC: message from an unregistered number", ROUTE),
        row(30036, S, C.RATE_LIMITED, "Validity period expired: it waited in Twilio's queue too long"),
        row(30410, T, C.UNKNOWN, "Provider timeout: failed and not retried by Twilio; send again later"),
        row(30450, T, C.BLOCKED, "Delivery blocked: SMS pumping protection on this destination", ROUTE),
        row(63038, S, C.QUOTA_EXCEEDED, "Account exceeded the daily messages limit", ACCOUNT),
    ]
)
UNKNOWN = rule(
    True,
    T,
    C.UNKNOWN,
    "https://www.twilio.com/docs/messaging/guides/debugging-common-issues",
    "an undelivered or failed message with any other code, or none",
)


def verdict(code: int | None) -> Verdict:
    """An undelivered/failed message's verdict from its ErrorCode (None or unlisted: final, unknown)."""
    return Verdict.of(ERRORS.get(code, UNKNOWN) if code is not None else UNKNOWN, PROVIDER, code)
