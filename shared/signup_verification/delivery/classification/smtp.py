"""SMTP permanent refusals (5yz replies, RFC 5321 section 4.2.1) by their enhanced status code
(RFC 3463; 5.1.10 is RFC 7505's null MX, 5.7.23 and 5.7.26 RFC 7372's authentication results).

The server we talk to is our relay (SMTP_HOST). A refusal of the recipient (5.1.x at RCPT) is the
recipient's fault; a refusal of us (our sender address, our host, relaying, authentication) is ours
and fails every message; 5.7.x is policy, usually our reputation or authentication (SPF, DKIM,
DMARC), not the address; 5.2.2 (mailbox full) is often temporary in practice: final for this
message, nobody's fault. 4yz replies are transient and never reach this table.
"""

from __future__ import annotations

from . import Category, Fault, Rule, Verdict, rule

PROVIDER = "smtp"
_RFC3463 = "https://www.rfc-editor.org/rfc/rfc3463#section-3"
R, S, T = Fault.RECIPIENT, Fault.SENDER_OR_ACCOUNT, Fault.TRANSIENT_OR_UNKNOWN
C = Category

ENHANCED: dict[str, Rule] = {
    "5.1.1": rule(True, R, C.BOUNCED, f"{_RFC3463}.2", "bad destination mailbox address"),
    "5.1.2": rule(True, R, C.INVALID_DESTINATION, f"{_RFC3463}.2", "bad destination system address"),
    "5.1.3": rule(True, R, C.INVALID_DESTINATION, f"{_RFC3463}.2", "bad destination mailbox address syntax"),
    "5.1.6": rule(True, R, C.BOUNCED, f"{_RFC3463}.2", "destination mailbox has moved"),
    "5.1.10": rule(True, R, C.INVALID_DESTINATION, "https://www.rfc-editor.org/rfc/rfc7505#section-4.2", "null MX"),
    "5.1.7": rule(True, S, C.SENDER_MISCONFIGURED, f"{_RFC3463}.2", "bad sender mailbox syntax", holds_channel=True),
    "5.1.8": rule(True, S, C.SENDER_MISCONFIGURED, f"{_RFC3463}.2", "bad sender system address", holds_channel=True),
    "5.2.1": rule(True, R, C.BOUNCED, f"{_RFC3463}.3", "mailbox disabled, not accepting messages"),
    "5.2.2": rule(True, T, C.MAILBOX_FULL, f"{_RFC3463}.3", "mailbox full: often temporary in practice"),
    "5.2.3": rule(True, S, C.MESSAGE_REJECTED, f"{_RFC3463}.3", "message length exceeds administrative limit"),
    "5.3.4": rule(True, S, C.MESSAGE_REJECTED, f"{_RFC3463}.4", "message too big for system"),
    "5.7.1": rule(True, S, C.BLOCKED, f"{_RFC3463}.8", "delivery not authorized, message refused (policy)"),
    "5.7.8": rule(
        True,
        S,
        C.SENDER_MISCONFIGURED,
        "https://www.rfc-editor.org/rfc/rfc4954#section-6",
        "authentication credentials invalid",
        holds_channel=True,
    ),
    "5.7.23": rule(
        True,
        S,
        C.SENDER_MISCONFIGURED,
        "https://www.rfc-editor.org/rfc/rfc7372#section-3.2",
        "SPF validation failed",
        holds_channel=True,
    ),
    "5.7.26": rule(
        True,
        S,
        C.SENDER_MISCONFIGURED,
        "https://www.rfc-editor.org/rfc/rfc7372#section-3.3",
        "multiple authentication checks failed (DMARC)",
        holds_channel=True,
    ),
}
# By class and subject when the detail is not listed: 5.1.x addressing, 5.7.x security or policy.
SUBJECTS: dict[str, Rule] = {
    "5.1": rule(True, R, C.BOUNCED, f"{_RFC3463}.2", "any other addressing status"),
    "5.7": rule(True, S, C.BLOCKED, f"{_RFC3463}.8", "any other security or policy status"),
}
# Refusals of us rather than of the recipient, whatever their code: the server refuses our sender,
# our host, our HELO name, relaying for us, or our login. Every message would meet them.
REFUSES_US = rule(True, S, C.SENDER_MISCONFIGURED, "https://www.rfc-editor.org/rfc/rfc5321#section-3.3",
                  "our sender, host, HELO name, relaying or login refused", holds_channel=True)  # fmt: skip
REFUSES_US_PHRASES = (b"sender address rejected", b"helo command rejected", b"client host rejected")
# A plain 550 / 553 at RCPT without an enhanced code: mailbox unavailable / name not allowed.
NO_SUCH_MAILBOX = rule(True, R, C.BOUNCED, "https://www.rfc-editor.org/rfc/rfc5321#section-4.2.2",
                       "550 / 553 at RCPT without an enhanced code: mailbox unavailable")  # fmt: skip
MESSAGE_REFUSED = rule(True, S, C.MESSAGE_REJECTED, "https://www.rfc-editor.org/rfc/rfc5321#section-4.2.2",
                       "5yz to DATA or after the message (content, size)")  # fmt: skip
OTHER = rule(True, T, C.UNKNOWN, "https://www.rfc-editor.org/rfc/rfc5321#section-4.2.1", "any other 5yz")


def lookup(enhanced: str) -> Rule | None:
    """The table's row for an enhanced status code (exact, then by class.subject), or None."""
    if enhanced in ENHANCED:
        return ENHANCED[enhanced]
    return SUBJECTS.get(".".join(enhanced.split(".")[:2])) if enhanced else None


def reply_verdict(stage: str, code: int, enhanced: str, text: bytes) -> Verdict:
    """A 5yz reply at `stage` (connect | ehlo | helo | auth | mail | rcpt | data | end)."""
    lowered = (text or b"").lower()
    shown = enhanced or str(code)
    relaying = b"relay" in lowered and (not enhanced or enhanced.startswith("5.7."))  # relaying denied to us
    if (
        stage in ("connect", "ehlo", "helo", "auth", "mail")
        or relaying
        or any(p in lowered for p in REFUSES_US_PHRASES)
    ):
        return Verdict.of(REFUSES_US, PROVIDER, shown)
    found = lookup(enhanced)
    if found is not None:
        return Verdict.of(found, PROVIDER, shown)
    if stage == "rcpt" and code in (550, 553):
        return Verdict.of(NO_SUCH_MAILBOX, PROVIDER, shown)
    if stage in ("data", "end") or code == 552:
        return Verdict.of(MESSAGE_REFUSED, PROVIDER, shown)
    return Verdict.of(OTHER, PROVIDER, shown)


def bounce_rule(status: str) -> Rule | None:
    """A provider's bounce with this SMTP status, where the status says more than "bounced": a full
    mailbox or a policy refusal is not the address's fault."""
    found = lookup(status)
    if found is None or found.fault is Fault.RECIPIENT:
        return None
    return rule(True, found.fault, found.category, found.source, found.meaning)  # one bounce holds no channel
