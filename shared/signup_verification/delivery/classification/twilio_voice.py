"""Twilio's Calls API: the error codes of a refused call (the 400 answers of Calls create), the call's
final statuses in its status callbacks (`CallStatus`), and answering machine detection's results
(`AnsweredBy`). A call is one attempt: a call not answered is final for its step (Twilio does not
call again), which brings the next step forward.

Outcomes (`observed`):
- `completed` answered by a person (`human`), or by someone detection could not tell (`unknown`, or
  no detection result): delivered, the code was read;
- answered by a machine (`machine_start`, `machine_end_beep`, `machine_end_silence`,
  `machine_end_other`) or a fax, as the asynchronous detection's own callback says (`answered`) or a
  `completed` callback carrying `AnsweredBy`: final, not delivered, nobody's fault: a code is not for
  a voicemail box, which a weak PIN or a recycled number exposes (the report path ends the call);
- `busy`, `no-answer`: final, not delivered, a passing condition (never suppresses the number);
- `failed`: Twilio could not place the call (most often a number that does not exist, but also a
  carrier's refusal): final, nobody's fault we can name, unless it names a listed error code;
- `canceled`: the call was canceled before it was answered (by us, when a proof ended the step): final;
- `queued`, `initiated`, `ringing`, `in-progress`: not final yet.

Each row cites Twilio's documentation and has a scope as the SMS table's rows do (a landline is
reachable by a call, so 21614 and 21635, the SMS table's "not a mobile", never apply here).
"""

from __future__ import annotations

from . import Category, Fault, Rule, Scope, Verdict, rule
from . import twilio as sms_table
from .twilio import row

PROVIDER = sms_table.PROVIDER
_STATUS = "https://www.twilio.com/docs/voice/api/call-resource#call-status-values"
_AMD = "https://www.twilio.com/docs/voice/answering-machine-detection#answeredby-values"
R, S, T = Fault.RECIPIENT, Fault.SENDER_OR_ACCOUNT, Fault.TRANSIENT_OR_UNKNOWN
C = Category
ACCOUNT, ROUTE, MESSAGE = Scope.ACCOUNT, Scope.ROUTE, Scope.MESSAGE


# The Messages API's codes that Calls create answers too mean the same (the SMS table's rows).
ERRORS: dict[int, Rule] = {code: sms_table.ERRORS[code] for code in (20003, 20404, 21211, 21212)} | dict(
    [
        row(21210, S, C.SENDER_MISCONFIGURED, "'From' phone number not verified (not a caller ID of ours)", ACCOUNT),
        row(21213, S, C.SENDER_MISCONFIGURED, "'From' phone number is required", ACCOUNT),
        row(21214, T, C.UNREACHABLE, "'To' phone number cannot be reached"),
        row(21215, S, C.REGION_NOT_PERMITTED, "Geo permissions do not allow calls to this number", ROUTE),
        row(21216, S, C.REGION_NOT_PERMITTED, "Account not allowed to call this number (high-risk)", ROUTE),
        row(21217, R, C.INVALID_DESTINATION, "Phone number does not appear to be valid"),
        row(21219, S, C.SENDER_MISCONFIGURED, "Trial account: the 'To' number is not verified", ROUTE),
    ]
)

CALL_STATUSES: dict[str, Rule] = {
    "busy": rule(True, T, C.UNREACHABLE, _STATUS, "The line was busy"),
    "no-answer": rule(True, T, C.UNREACHABLE, _STATUS, "Nobody answered before the ring timeout"),
    "failed": rule(True, T, C.UNKNOWN, _STATUS, "The call could not be placed (often a number that does not exist)"),
    "canceled": rule(True, T, C.UNKNOWN, _STATUS, "Canceled before it was answered (a proof ended the step)"),
}
_MACHINE = "A machine answered: the code is not left on a voicemail box"
ANSWERED_BY: dict[str, Rule] = {
    "machine_start": rule(True, T, C.UNREACHABLE, _AMD, _MACHINE),
    "machine_end_beep": rule(True, T, C.UNREACHABLE, _AMD, _MACHINE),
    "machine_end_silence": rule(True, T, C.UNREACHABLE, _AMD, _MACHINE),
    "machine_end_other": rule(True, T, C.UNREACHABLE, _AMD, _MACHINE),
    "fax": rule(True, T, C.UNREACHABLE, _AMD, "A fax machine answered"),
}
NOT_FINAL = frozenset({"queued", "initiated", "ringing", "in-progress"})
UNKNOWN = rule(True, T, C.UNKNOWN, _STATUS, "a call status or refusal code not listed here")


def verdict(code: int | None) -> Verdict:
    """A refused call's verdict from its error code (None or unlisted: final, unknown)."""
    return Verdict.of(ERRORS.get(code, UNKNOWN) if code is not None else UNKNOWN, PROVIDER, code)


def observed(
    call_status: str, answered_by: str | None = None, error_code: int | None = None
) -> tuple[str, Verdict | None]:
    """A status callback's outcome: ('pending', None), ('delivered', None) or ('failed', its verdict). A
    `failed` call that names a listed error code (21217, 21215, ...) takes that code's row."""
    if call_status in NOT_FINAL:
        return "pending", None
    if call_status == "completed":
        found = answered(answered_by)
        return ("failed", found) if found else ("delivered", None)
    if call_status == "failed" and error_code in ERRORS:
        return "failed", verdict(error_code)
    return "failed", Verdict.of(CALL_STATUSES.get(call_status, UNKNOWN), PROVIDER, call_status)


def answered(answered_by: str | None) -> Verdict | None:
    """Answering machine detection's result (the AsyncAmdStatusCallback's `AnsweredBy`): a machine's or
    a fax's verdict (final: the call is ended, the next step comes forward); None for a person or a
    result detection could not reach (`human`, `unknown`)."""
    found = ANSWERED_BY.get(answered_by or "")
    return Verdict.of(found, PROVIDER, answered_by) if found else None
