"""Outcome classes and the channel adapter protocol.

An adapter turns one rendered message into one `SendResult`; it never raises for a provider's
answer or a network failure. The outcome says what we know about the send, not about delivery:

  accepted   the provider took the message (a positive submission result, nothing more)
  retryable  it certainly was not sent (refused before acceptance, 4xx-transient, 429): try later
  failed     it will never be sent as is (invalid destination, unsubscribed, bad credentials)
  ambiguous  it may have been sent (timeout or reset after the request went out, a 5xx that may
             have sent): never resent at once; the channel's policy decides (outbox/config.py)

`error_class` is a short, stable, low-cardinality label; `detail` is a short human text. Neither
ever holds the token, the code, or the destination (see `scrub` and `forget`). A failed result
carries its `Verdict` (delivery/classification/): whose fault it is and the reason the site reads.
docs/channels.md has the tables mapping every provider response to its outcome and verdict.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import UTC
from typing import Protocol, runtime_checkable

from ...outbox.states import SEND_OUTCOMES, AttemptOutcome
from ...platform.redaction import forget_secret
from ..classification import Category, Verdict, configuration

CONFIGURATION = "configuration"  # error_class of failures an operator must fix: they alert
BLOCKED = "provider_blocked"  # retryable: the provider blocks us for a while (alerts, stops the channel)


@dataclass(frozen=True)
class SendResult:
    outcome: AttemptOutcome  # one of SEND_OUTCOMES
    error_class: str | None = None
    detail: str | None = None
    provider_ref: str | None = None
    retry_after: float | None = None  # seconds the provider asked us to wait
    verdict: Verdict | None = None  # a failed result's: whose fault, which reason (never None once failed)

    def __post_init__(self) -> None:
        if self.outcome not in SEND_OUTCOMES:
            raise ValueError(f"a send cannot end {self.outcome!r}")

    @classmethod
    def accepted(cls, provider_ref: str | None = None) -> SendResult:
        return cls(AttemptOutcome.ACCEPTED, provider_ref=provider_ref)

    @classmethod
    def retryable(cls, error_class: str, detail: str, retry_after: float | None = None) -> SendResult:
        return cls(AttemptOutcome.RETRYABLE, error_class, detail, retry_after=retry_after)

    @classmethod
    def failed(cls, error_class: str, detail: str, verdict: Verdict) -> SendResult:
        return cls(AttemptOutcome.FAILED, error_class, detail, verdict=verdict)

    @classmethod
    def refused(cls, verdict: Verdict, detail: str) -> SendResult:
        """A provider's refusal for good, labelled by its verdict: `configuration` for what fails every
        message of the channel because of our sender, credentials or account, else the category."""
        return cls.failed(error_class(verdict), detail, verdict)

    @classmethod
    def configuration(cls, detail: str, provider: str | None) -> SendResult:
        """Our configuration is wrong (credentials, TLS trust, a missing adapter): every send of the
        channel would fail; it stops the channel and alerts."""
        return cls.failed(CONFIGURATION, detail, configuration(provider))

    @classmethod
    def ambiguous(
        cls, error_class: str, detail: str, provider_ref: str | None = None, retry_after: float | None = None
    ) -> SendResult:
        return cls(AttemptOutcome.AMBIGUOUS, error_class, detail, provider_ref, retry_after)

    @property
    def is_configuration_error(self) -> bool:
        return self.outcome is AttemptOutcome.FAILED and self.error_class == CONFIGURATION

    @property
    def holds_channel(self) -> bool:
        """A refusal for good that every message of the channel would meet (an account fault)."""
        return self.outcome is AttemptOutcome.FAILED and self.verdict is not None and self.verdict.holds_channel

    @property
    def stops_channel(self) -> bool:
        """Every later send of this channel would meet the same answer (an account fault, or the
        provider blocking our account): stop it and alert. A route or message fault never does."""
        return self.holds_channel or (self.outcome is AttemptOutcome.RETRYABLE and self.error_class == BLOCKED)


def error_class(verdict: Verdict) -> str:
    if verdict.holds_channel and verdict.category is Category.SENDER_MISCONFIGURED:
        return CONFIGURATION
    return verdict.category.value


@runtime_checkable
class Channel(Protocol):
    """A channel adapter. `send` is called from several threads at once; `deadline` is a
    time.monotonic() instant the call must return by (it bounds every network wait)."""

    channel: str  # 'email' | 'sms': which messages it takes
    transport: str  # 'smtp' | 'sendgrid' | 'twilio' | 'console' | ...

    def send(self, message, deadline: float) -> SendResult: ...

    def close(self) -> None: ...


def forget(result: SendResult, secret: str) -> SendResult:
    """The result without the secret the adapter just rendered (the link token, the SMS code), nor any
    fragment of it: scrub() knows shapes, not values; a 6-digit code echoed in a provider's error looks
    like any number, and a quoted piece of a link is shorter than a token."""
    if not secret:
        return result
    return dataclasses.replace(
        result, detail=forget_secret(result.detail, secret), provider_ref=forget_secret(result.provider_ref, secret)
    )


def http_retry_after(value: str | None) -> float | None:
    """Retry-After as seconds (delta-seconds form; an HTTP-date is rare from these APIs)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        from datetime import datetime
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, (when - datetime.now(UTC)).total_seconds())
