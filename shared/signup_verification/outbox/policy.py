"""Retry and ambiguity policy: how long to wait after each outcome, per channel.

Backoff is exponential with full-range jitter and a ceiling (1, 5, 15 min by default) and honours
a provider's Retry-After. Ambiguous outcomes (the provider may have sent) never resend at once, nor
before a Retry-After the provider gave:
  retry - after `hold` seconds, attempt again (the channel can deduplicate, or the policy accepts
          a possible duplicate: email carries a stable Message-ID per intent, so clients collapse it);
  hold  - stay ambiguous for the operator (SMS: no provider idempotency key, a duplicate code
          reaches a phone);
  fail  - after `hold` seconds, give up.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, assert_never

from .states import AttemptOutcome

AmbiguityPolicy = Literal["retry", "hold", "fail"]
DEFAULT_BACKOFF = (60.0, 300.0, 900.0)


@dataclass(frozen=True)
class ChannelPolicy:
    ambiguity: AmbiguityPolicy
    hold_seconds: float


@dataclass(frozen=True)
class RetryPolicy:
    backoff: tuple[float, ...] = DEFAULT_BACKOFF
    jitter: float = 0.1  # +-10 % so a burst of failures does not retry in lockstep
    channels: Mapping[str, ChannelPolicy] = field(
        default_factory=lambda: {
            "email": ChannelPolicy("retry", 300.0),
            "sms": ChannelPolicy("hold", 300.0),
            # webhook events: the receiver deduplicates on webhook-id, so an ambiguous send is resent
            "webhook": ChannelPolicy("retry", 60.0),
        }
    )

    def retry_delay(
        self, attempt_number: int, retry_after: float | None = None, rng: random.Random | None = None
    ) -> float:
        """Seconds before the next attempt after a transient failure of attempt `attempt_number` (1-based)."""
        base = self.backoff[min(max(attempt_number, 1), len(self.backoff)) - 1]
        spread = base * self.jitter
        delay = base + (rng or random).uniform(-spread, spread)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.backoff[-1] * 4))
        return max(delay, 1.0)

    def channel(self, channel: str) -> ChannelPolicy:
        return self.channels.get(channel, ChannelPolicy("hold", 300.0))

    def ambiguous_delay(self, channel: str) -> float:
        return self.channel(channel).hold_seconds

    def settle_delay(
        self,
        outcome: AttemptOutcome,
        channel: str,
        attempt_number: int,
        retry_after: float | None = None,
        *,
        sent: bool = True,
    ) -> float:
        """The delay a settlement carries: backoff after a transient failure (none when the send never
        started: nothing was tried), the channel's hold after an ambiguous one (never an immediate
        resend), nothing for a final outcome. settle.sql decides whether the intent goes on at all."""
        match outcome:
            case AttemptOutcome.RETRYABLE:
                return self.retry_delay(attempt_number, retry_after) if sent else 0.0
            case AttemptOutcome.AMBIGUOUS:  # at least the hold; longer if the provider asked (a 503's Retry-After)
                hold = self.ambiguous_delay(channel)
                return max(hold, min(retry_after, self.backoff[-1] * 4)) if retry_after is not None else hold
            case AttemptOutcome.ACCEPTED | AttemptOutcome.FAILED:
                return 0.0
            case AttemptOutcome.ATTEMPTING | AttemptOutcome.RELEASED:
                raise ValueError(f"{outcome} is not the end of a send")
            case _:
                assert_never(outcome)
