"""SMTP permanent refusals (5yz replies, RFC 5321 section 4.2.1), classified by the protocol: the
stage the reply answered and its enhanced status code (RFC 3463; 5.1.10 is RFC 7505's null MX,
5.7.23 and 5.7.26 RFC 7372's authentication results, 5.7.8 RFC 4954's), never by its prose.

The server we talk to is our relay (SMTP_HOST). What a refusal can be about depends on the stage:
- connect, EHLO/HELO, AUTH, MAIL: the session and our sender address, before any recipient was
  named: every refusal there is of us (an account fault), except a message too large for the
  server (5.3.4, 5.2.3 to a MAIL SIZE=);
- RCPT, DATA and the end of data: about this recipient or this message. A relay may quote the
  remote server it asked (Postfix `reject_unverified_recipient`, Exim callouts), and an outsider
  chooses that server and its words: so no phrase counts here, and a reply is an account fault only
  when its enhanced code is one of our session's (credentials, authentication required, our sender
  address) and the reply neither echoes the recipient nor quotes another server. 5.1.x is the
  recipient's (suppressed); 5.7.x is policy, usually our reputation or authentication towards the
  receiving domain (SPF, DKIM, DMARC): a route fault of that domain, never the address's; 5.2.1
  (mailbox disabled) and 5.2.2 (mailbox full) are often temporary: final for this message,
  nobody's for good, never suppressed. 4yz replies are transient and never reach this table.
"""

from __future__ import annotations

import re

from . import Category, Fault, Rule, Scope, Verdict, at_most, rule

PROVIDER = "smtp"
_RFC3463 = "https://www.rfc-editor.org/rfc/rfc3463#section-3"
_RFC4954 = "https://www.rfc-editor.org/rfc/rfc4954#section-6"
R, S, T = Fault.RECIPIENT, Fault.SENDER_OR_ACCOUNT, Fault.TRANSIENT_OR_UNKNOWN
C = Category
ACCOUNT, ROUTE = Scope.ACCOUNT, Scope.ROUTE
SESSION_STAGES = frozenset({"connect", "ehlo", "helo", "auth", "mail"})

ENHANCED: dict[str, Rule] = {
    "5.1.1": rule(True, R, C.BOUNCED, f"{_RFC3463}.2", "bad destination mailbox address"),
    "5.1.2": rule(True, R, C.INVALID_DESTINATION, f"{_RFC3463}.2", "bad destination system address"),
    "5.1.3": rule(True, R, C.INVALID_DESTINATION, f"{_RFC3463}.2", "bad destination mailbox address syntax"),
    "5.1.6": rule(True, R, C.BOUNCED, f"{_RFC3463}.2", "destination mailbox has moved"),
    "5.1.10": rule(True, R, C.INVALID_DESTINATION, "https://www.rfc-editor.org/rfc/rfc7505#section-4.2", "null MX"),
    "5.1.7": rule(True, S, C.SENDER_MISCONFIGURED, f"{_RFC3463}.2", "bad sender mailbox syntax", scope=ACCOUNT),
    "5.1.8": rule(True, S, C.SENDER_MISCONFIGURED, f"{_RFC3463}.2", "bad sender system address", scope=ACCOUNT),
    "5.2.1": rule(
        True,
        T,
        C.UNREACHABLE,
        f"{_RFC3463}.3",
        "mailbox disabled, not accepting messages: often temporary, never suppressed",
    ),
    "5.2.2": rule(True, T, C.MAILBOX_FULL, f"{_RFC3463}.3", "mailbox full: often temporary in practice"),
    "5.2.3": rule(True, S, C.MESSAGE_REJECTED, f"{_RFC3463}.3", "message length exceeds administrative limit"),
    "5.3.4": rule(True, S, C.MESSAGE_REJECTED, f"{_RFC3463}.4", "message too big for system"),
    "5.7.1": rule(
        True, S, C.BLOCKED, f"{_RFC3463}.8", "delivery not authorized, message refused (policy)", scope=ROUTE
    ),
    "5.7.8": rule(True, S, C.SENDER_MISCONFIGURED, _RFC4954, "authentication credentials invalid", scope=ACCOUNT),
    "5.7.9": rule(True, S, C.SENDER_MISCONFIGURED, _RFC4954, "authentication mechanism is too weak", scope=ACCOUNT),
    "5.7.11": rule(
        True,
        S,
        C.SENDER_MISCONFIGURED,
        _RFC4954,
        "encryption required for requested authentication mechanism",
        scope=ACCOUNT,
    ),
    "5.7.13": rule(
        True,
        S,
        C.SENDER_MISCONFIGURED,
        "https://www.rfc-editor.org/rfc/rfc5248#section-2.4",
        "user account disabled (our login at the relay)",
        scope=ACCOUNT,
    ),
    "5.7.23": rule(
        True,
        S,
        C.SENDER_MISCONFIGURED,
        "https://www.rfc-editor.org/rfc/rfc7372#section-3.2",
        "SPF validation failed (at the receiving domain)",
        scope=ROUTE,
    ),
    "5.7.26": rule(
        True,
        S,
        C.SENDER_MISCONFIGURED,
        "https://www.rfc-editor.org/rfc/rfc7372#section-3.3",
        "multiple authentication checks failed (DMARC, at the receiving domain)",
        scope=ROUTE,
    ),
}
# By class and subject when the detail is not listed: 5.1.x addressing, 5.7.x security or policy.
SUBJECTS: dict[str, Rule] = {
    "5.1": rule(True, R, C.BOUNCED, f"{_RFC3463}.2", "any other addressing status"),
    "5.7": rule(True, S, C.BLOCKED, f"{_RFC3463}.8", "any other security or policy status", scope=ROUTE),
}
# A 5yz to the session itself (greeting, EHLO/HELO, AUTH, MAIL FROM), before any recipient was named:
# the server refuses our host, our HELO name, our login or our sender address. Every message meets it.
REFUSES_US = rule(
    True,
    S,
    C.SENDER_MISCONFIGURED,
    "https://www.rfc-editor.org/rfc/rfc5321#section-3.3",
    "any 5yz to the session or MAIL FROM: our host, HELO name, login or sender refused",
    scope=ACCOUNT,
)
# 530 (RFC 4954: "5.7.0 Authentication required") to RCPT or DATA: our relay wants a login.
AUTHENTICATION_REQUIRED = rule(
    True,
    S,
    C.SENDER_MISCONFIGURED,
    "https://www.rfc-editor.org/rfc/rfc4954#section-6",
    "530 authentication required (our session)",
    scope=ACCOUNT,
)
# A plain 550 / 553 at RCPT without an enhanced code: mailbox unavailable / name not allowed.
NO_SUCH_MAILBOX = rule(
    True,
    R,
    C.BOUNCED,
    "https://www.rfc-editor.org/rfc/rfc5321#section-4.2.2",
    "550 / 553 at RCPT without an enhanced code: mailbox unavailable",
)
MESSAGE_REFUSED = rule(
    True,
    S,
    C.MESSAGE_REJECTED,
    "https://www.rfc-editor.org/rfc/rfc5321#section-4.2.2",
    "5yz to DATA or after the message, without an enhanced code (content, size)",
)
OTHER = rule(True, T, C.UNKNOWN, "https://www.rfc-editor.org/rfc/rfc5321#section-4.2.1", "any other 5yz")

AUTH_REPLY_CODES = frozenset({530, 534, 535, 538})  # RFC 4954's replies about authentication
# Another server's reply inside this one: "host mx.example[192.0.2.1] said: 550 5.7.1 ...", an Exim
# callout's "550-Callout verification failed: 550 ...", a nested reply or enhanced code.
_QUOTES_ANOTHER = re.compile(
    rb"\bsaid:|\bresponse was\b|\bcallout\b|\bremote (?:host|server)\b|\bhost \S+\[|(?<![\d.])[245]\d\d[ -]|(?<![\d.])[245]\.\d{1,3}\.\d{1,3}\b",
    re.IGNORECASE,
)


def lookup(enhanced: str) -> Rule | None:
    """The table's row for an enhanced status code (exact, then by class.subject), or None."""
    if enhanced in ENHANCED:
        return ENHANCED[enhanced]
    return SUBJECTS.get(".".join(enhanced.split(".")[:2])) if enhanced else None


def speaks_for_another(text: bytes, recipient: str | None) -> bool:
    """The reply echoes the recipient or quotes another server: its words may be an outsider's."""
    lowered = (text or b"").lower()
    if recipient and recipient.lower().encode("utf-8", "replace") in lowered:
        return True
    body = re.sub(rb"^\s*[245]\.\d{1,3}\.\d{1,3}\s*", b"", lowered, count=1)  # this reply's own enhanced code
    return _QUOTES_ANOTHER.search(body) is not None


def reply_verdict(stage: str, code: int, enhanced: str, text: bytes, recipient: str | None = None) -> Verdict:
    """A 5yz reply at `stage` (connect | ehlo | helo | auth | mail | rcpt | data | end). `recipient`:
    the address RCPT named (to tell a reply that echoes it)."""
    shown = enhanced or str(code)
    found = lookup(enhanced)
    if stage in SESSION_STAGES:
        size = found is not None and found.category is C.MESSAGE_REJECTED and found.scope is Scope.MESSAGE
        return Verdict.of(found if size and found is not None else REFUSES_US, PROVIDER, shown)
    if code in AUTH_REPLY_CODES and (found is None or found.scope is not Scope.ACCOUNT):
        found = AUTHENTICATION_REQUIRED  # 530 5.7.0 "authentication required": our session's
    if found is None:
        if stage == "rcpt" and code in (550, 553):
            found = NO_SUCH_MAILBOX
        elif stage in ("data", "end") or code == 552:
            found = MESSAGE_REFUSED
        else:
            found = OTHER
    if found.scope is Scope.ACCOUNT and speaks_for_another(text, recipient):
        found = at_most(found, Scope.ROUTE)  # an outsider's server may have said it: the receiving domain only
    return Verdict.of(found, PROVIDER, shown)


def bounce_rule(status: str) -> Rule | None:
    """A provider's bounce with this SMTP status, where the status says more than "bounced": a full
    or disabled mailbox, or a policy refusal, is not the address's fault. A remote server's status
    speaks for its own domain at most: no bounce holds the channel."""
    found = lookup(status)
    if found is None or found.fault is Fault.RECIPIENT:
        return None
    return at_most(found, Scope.ROUTE)
