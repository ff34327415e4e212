"""The sandbox of `verifyctl dev`: test destinations that produce each outcome deterministically,
through the local emulated providers (the mailbox's SMTP server and its SendGrid-style reports, the
fake Twilio API and its status callbacks). Outside production only: production never runs local/.

One table, read by the emulators (mailbox.py, provider_reports.py, fake_twilio.py) and listed in
docs/integrate.md ("Testing against the sandbox"; tests/unit/test_sandbox_docs.py holds the two equal).

- Email: the local part before any `+tag` decides, on any domain (`bounce@run-7.example.com`), so a
  site's tests can use a fresh address each time (a bounced or spam-reported address is suppressed:
  create answers 422 destination-suppressed to that exact address afterwards; the `+tag` aliases of
  one mailbox share its rate limit, so a fresh domain rather than a fresh tag). Any other address
  is delivered.
- SMS: fixed numbers (fictional 555-01xx, mobile enough for create). Any other number is delivered.
- WhatsApp and calls: fixed numbers of their own, in the same range. Each number behaves on its own
  channel only: on another phone channel it is an ordinary number (delivered, or answered by a person).
- A landline for calls (LANDLINE, London's fictional 020 7946 0xxx): a call reaches it as any number;
  create refuses it for SMS and WhatsApp (`sms-number-type-not-allowed`).
- Twilio's own magic test numbers (+15005550001 ...) answer their documented errors; create accepts
  them when the configured Twilio sender is Twilio's test sender (verifications/abuse.py).
"""

from __future__ import annotations

from dataclasses import dataclass

SLOW_SECONDS = 2.0  # a slow provider: well within SEND_TIMEOUT_SECONDS (10), so the send still succeeds
SPAM_REPORT_AFTER_SECONDS = 0.5  # after the delivered report


@dataclass(frozen=True)
class SandboxDestination:
    destination: str  # an email local part (before `+`), or an E.164 number
    channel: str  # email | sms | whatsapp | voice
    outcome: str  # what the site sees: the delivery's status (and reason), as the read API and webhooks say it


EMAIL = {
    "bounce": SandboxDestination(
        "bounce", "email", "undeliverable, reason bounced (5.1.1, recipient); a hard bounce report"
    ),
    "spam": SandboxDestination(
        "spam", "email", "delivered, then a spam report: it stays delivered, the address is suppressed (spam_reported)"
    ),
    "slow": SandboxDestination(
        "slow", "email", f"delivered; the SMTP server answers after {SLOW_SECONDS:g} s (a slow provider)"
    ),
}
# Twilio status callbacks: the final status and its error code.
SMS_REPORTS = {"+12025550110": ("undelivered", 30003), "+12025550111": ("failed", 30005)}
# The Messages API answers 500: after creating the message (True) or without creating it (False).
SMS_SERVER_ERRORS = {"+12025550150": True, "+12025550151": False}
SMS_SLOW = frozenset({"+12025550160"})
# WhatsApp status callbacks (a `whatsapp:` message the fake Twilio took): the final status and its code.
WHATSAPP_REPORTS = {"+12025550180": ("undelivered", 63003), "+12025550181": ("failed", 63016)}
# A call's callbacks (provider_reports.py call_callbacks): how the call ends; any other number answers
# as a person.
CALL_REPORTS = {"+12025550170": "busy", "+12025550171": "no-answer", "+12025550172": "machine",
                "+12025550173": "failed"}  # fmt: skip
LANDLINE = "+442079460100"
WHATSAPP = {
    "+12025550180": SandboxDestination(
        "+12025550180",
        "whatsapp",
        "undeliverable, reason invalid_destination (63003: no WhatsApp on this number; suppressed for WhatsApp only)",
    ),
    "+12025550181": SandboxDestination(
        "+12025550181",
        "whatsapp",
        "undeliverable, reason message_rejected (63016: not a template; an account fault, nothing suppressed)",
    ),
}
CALLS = {
    "+12025550170": SandboxDestination("+12025550170", "voice", "undeliverable, reason unreachable (busy)"),
    "+12025550171": SandboxDestination("+12025550171", "voice", "undeliverable, reason unreachable (no-answer)"),
    "+12025550172": SandboxDestination(
        "+12025550172", "voice", "undeliverable, reason unreachable (a machine answered: the call is ended)"
    ),
    "+12025550173": SandboxDestination("+12025550173", "voice", "undeliverable, reason unknown (failed)"),
    LANDLINE: SandboxDestination(LANDLINE, "voice", "delivered: a landline, answered by a person"),
}
SMS = {
    "+12025550110": SandboxDestination(
        "+12025550110", "sms", "undeliverable, reason unreachable (30003: the handset is off; not suppressed)"
    ),
    "+12025550111": SandboxDestination(
        "+12025550111", "sms", "undeliverable, reason invalid_destination (30005: unknown number; suppressed)"
    ),
    "+12025550150": SandboxDestination(
        "+12025550150",
        "sms",
        "ambiguous (a 500 after the message was created): the reconcile lookup finds it, accepted",
    ),
    "+12025550151": SandboxDestination(
        "+12025550151", "sms", "ambiguous (a 500, nothing created): the lookup proves it absent, retried"
    ),
    "+12025550160": SandboxDestination(
        "+12025550160", "sms", f"delivered; the Messages API answers after {SLOW_SECONDS:g} s (a slow provider)"
    ),
}


def email_behaviour(address: str) -> str | None:
    """'bounce' | 'spam' | 'slow' for a sandbox address, else None (delivered)."""
    local = address.rpartition("@")[0].split("+", 1)[0].lower()
    return local if local in EMAIL else None
