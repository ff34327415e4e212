"""Twilio's WhatsApp error codes (63xxx), at submission (the Messages API's 400 answers) and in status
callbacks (`undelivered` / `failed` with `ErrorCode`). A WhatsApp message goes through the same
Messages API as an SMS, so the account's and the request's codes of the SMS table (20003, 21211,
63038, ...) mean the same here: `verdict` reads this table first, then Twilio's SMS table.

Each row cites twilio.com/docs/api/errors/<code> (Twilio maps Meta's own codes onto these:
twilio.com/docs/whatsapp/api/error-code-mapping) and has a scope (classification/__init__.py):
- account: the WhatsApp sender or Business account (63001 the channel cannot authenticate, 63007 no
  WhatsApp sender with this From, 63020 the Business Manager account, 63112 the account disabled by
  Meta), or a request every message of ours makes (63016 a message that is not a template, 63028 and
  63030 the template's variables): every message meets it;
- route: 63015, the sandbox's recipients that have not joined it (as 21608 a trial account's
  unverified numbers): the sender towards some destinations only;
- message: the recipient (63003 a number without WhatsApp, 63024 an invalid recipient), the content
  of one message, one language's template (63027: that language's approved template is missing,
  which the other languages do not meet), or a passing condition (63009, 63010, 63012 failures on
  Meta's side or Twilio's; 63018 the rate of the sender: sent again by the next attempt).
A code in neither table, on an undelivered or failed callback, is final with an unknown cause.
"""

from __future__ import annotations

from . import Category, Fault, Rule, Scope, Verdict
from . import twilio as sms_table
from .twilio import row

PROVIDER = sms_table.PROVIDER
R, S, T = Fault.RECIPIENT, Fault.SENDER_OR_ACCOUNT, Fault.TRANSIENT_OR_UNKNOWN
C = Category
ACCOUNT, ROUTE, MESSAGE = Scope.ACCOUNT, Scope.ROUTE, Scope.MESSAGE


ERRORS: dict[int, Rule] = dict(
    [
        row(63001, S, C.SENDER_MISCONFIGURED, "Channel could not authenticate the request (WhatsApp sender)", ACCOUNT),
        row(63003, R, C.INVALID_DESTINATION, "Channel could not find the To address: no WhatsApp on this number"),
        row(63005, S, C.MESSAGE_REJECTED, "Channel did not accept the given content"),
        row(63007, S, C.SENDER_MISCONFIGURED, "No WhatsApp sender (Channel) with the specified From address", ACCOUNT),
        row(63009, T, C.UNKNOWN, "Channel provider (Meta) returned an internal service error"),
        row(63010, T, C.UNKNOWN, "Twilio's platform encountered an internal error processing this message"),
        row(63012, T, C.UNKNOWN, "Channel provider (Meta) returned an unknown or internal error"),
        row(63013, S, C.BLOCKED, "Channel policy violation (WhatsApp Business or commerce policy)"),
        row(63015, S, C.SENDER_MISCONFIGURED, "Sandbox: the recipient has not joined the WhatsApp sandbox", ROUTE),
        row(63016, S, C.MESSAGE_REJECTED, "A free-form message outside the 24 h window: send a template", ACCOUNT),
        row(63018, S, C.RATE_LIMITED, "Rate limit exceeded for the WhatsApp sender"),
        row(63020, S, C.SENDER_MISCONFIGURED, "Business Manager account error (not verified, or payment)", ACCOUNT),
        row(63021, S, C.MESSAGE_REJECTED, "Channel invalid content error (too long, unsupported component)"),
        row(63024, R, C.INVALID_DESTINATION, "Invalid message recipient"),
        row(63027, S, C.SENDER_MISCONFIGURED, "No approved template for this language and locale"),
        row(63028, S, C.MESSAGE_REJECTED, "Number of parameters does not match the template's", ACCOUNT),
        row(63030, S, C.MESSAGE_REJECTED, "Unsupported parameter for this type of channel message", ACCOUNT),
        row(63112, S, C.SENDER_MISCONFIGURED, "Meta disabled the WhatsApp Business account", ACCOUNT),
    ]
)


def find(code: int | None) -> Rule | None:
    """The row for a code of a WhatsApp message: this table's, else the SMS table's (None: unlisted)."""
    if code is None:
        return None
    return ERRORS.get(code) or sms_table.ERRORS.get(code)


def verdict(code: int | None) -> Verdict:
    """An undelivered/failed WhatsApp message's verdict from its ErrorCode (None or unlisted: final, unknown)."""
    return Verdict.of(find(code) or sms_table.UNKNOWN, PROVIDER, code)
