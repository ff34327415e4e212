"""Twilio's error codes: at submission (the Messages API's 400 answers) and in status callbacks
(`undelivered` / `failed` with `ErrorCode`). One table for both: Twilio uses the same codes in
either place, and a failed message never arrives (Twilio does not retry it).

Each row cites twilio.com/docs/api/errors/<code>. A code that is not here, on an undelivered or
failed callback, is final with an unknown cause: never the recipient's fault, so never suppressed.
"""

from __future__ import annotations

from . import Category, Fault, Rule, Verdict, rule

PROVIDER = "twilio"
_DOCS = "https://www.twilio.com/docs/api/errors/"
R, S, T = Fault.RECIPIENT, Fault.SENDER_OR_ACCOUNT, Fault.TRANSIENT_OR_UNKNOWN
C = Category


def _row(code: int, fault: Fault, category: Category, meaning: str, *, holds_channel: bool = False) -> tuple[int, Rule]:
    return code, rule(True, fault, category, f"{_DOCS}{code}", meaning, holds_channel=holds_channel)


ERRORS: dict[int, Rule] = dict(
    [
        # credentials and the account: every message fails
        _row(20003, S, C.SENDER_MISCONFIGURED, "Authentication Error", holds_channel=True),
        _row(20404, S, C.SENDER_MISCONFIGURED, "The requested resource was not found", holds_channel=True),
        # the request: To, From, Body
        _row(21211, R, C.INVALID_DESTINATION, "Invalid 'To' Phone Number"),
        _row(21212, S, C.SENDER_MISCONFIGURED, "Invalid 'From' Phone Number", holds_channel=True),
        _row(21408, S, C.REGION_NOT_PERMITTED, "Permission to send an SMS has not been enabled for the region"),
        _row(21603, S, C.SENDER_MISCONFIGURED, "'From' phone number is required", holds_channel=True),
        _row(21604, S, C.MESSAGE_REJECTED, "'To' phone number is required", holds_channel=True),
        _row(21606, S, C.SENDER_MISCONFIGURED, "'From' number is not SMS-capable", holds_channel=True),
        _row(21608, S, C.SENDER_MISCONFIGURED, "Trial account: number is unverified", holds_channel=True),
        _row(21610, R, C.UNSUBSCRIBED, "Attempt to send to unsubscribed recipient (replied STOP)"),
        _row(21612, R, C.NOT_MOBILE, "The 'To' phone number is not currently reachable via SMS"),
        _row(21614, R, C.NOT_MOBILE, "'To' number is not a valid mobile number"),
        _row(21617, S, C.MESSAGE_REJECTED, "The concatenated message body exceeds the 1600 character limit"),
        _row(21635, R, C.NOT_MOBILE, "'To' number cannot be a landline"),
        _row(21659, S, C.SENDER_MISCONFIGURED, "Source number is not a Twilio number", holds_channel=True),
        # delivery (status callbacks)
        _row(30001, S, C.RATE_LIMITED, "Queue overflow: sent faster than the sender's rate"),
        _row(30002, S, C.SENDER_MISCONFIGURED, "Account suspended", holds_channel=True),
        _row(30003, T, C.UNREACHABLE, "Unreachable destination handset (off, no signal): not the number's fault"),
        _row(30004, R, C.BLOCKED, "Message blocked (by the recipient or their carrier for this number)"),
        _row(30005, R, C.INVALID_DESTINATION, "Unknown destination handset (inactive number)"),
        _row(30006, R, C.NOT_MOBILE, "Landline or unreachable carrier"),
        _row(30007, S, C.CARRIER_FILTERED, "Message filtered: our content or sender", holds_channel=True),
        _row(30008, T, C.UNKNOWN, "Unknown error"),
        _row(30022, S, C.RATE_LIMITED, "US A2P 10DLC: rate limits exceeded"),
        _row(30023, S, C.QUOTA_EXCEEDED, "US A2P 10DLC: daily message cap reached", holds_channel=True),
        _row(30032, S, C.SENDER_MISCONFIGURED, "Toll-free number has not been verified", holds_channel=True),
        _row(30034, S, C.SENDER_MISCONFIGURED, "US A2P 10DLC: message from an unregistered number", holds_channel=True),
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
