"""The outbox's policies: how long to wait after each outcome, per channel, and what a failure for
good sets off (README "Dispatch"; each setting declared once, platform/settings.py).

Retry: backoff is exponential with full-range jitter and a ceiling (1, 5, 15 min by default) and
honours a provider's Retry-After. Ambiguous outcomes (the provider may have sent) never resend at
once, nor before a Retry-After the provider gave:
  retry - after `hold` seconds, attempt again (the channel can deduplicate, or the policy accepts
          a possible duplicate: email carries a stable Message-ID per intent, so clients collapse it);
  hold  - stay ambiguous for the operator (SMS: no provider idempotency key, a duplicate code
          reaches a phone);
  fail  - after `hold` seconds, give up.

A failure for good (docs/channels.md, "Whose fault" and "What a fault may hold"):
  a recipient's fault  the exact destination goes on the suppression list for `suppress_days`
                       (None: until an operator clears it: `verifyctl suppression clear`)
  an account fault     counted per channel; `hold_after` of them within `hold_window_seconds` hold
                       the channel: the claim takes none of its intents (they wait, none fails)
                       until `hold_seconds` pass or an operator resumes it (`verifyctl channel
                       resume`), and `status` pages
  a route fault        counted per route (an SMS destination country, an email receiving domain)
                       within the same window; the route alone is held for `hold_seconds` once its
                       faults came from `route_min_destinations` distinct destinations and as many
                       accounts and make up `route_min_share` of the route's recent sends
                       (record_route_outcomes says how they are counted)
  a message fault      nothing beyond its own delivery
The statements that record failures (outbox/queries/settle.sql:settle, the reports' ingest) apply them, in the
transaction of the failure, with these values as parameters.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, assert_never

from ..platform.config import CLOUD_TASKS_API, production_flag
from ..platform.errors import ConfigError
from ..platform.settings import Env, each, number, setting
from ..platform.tasks import queue_name, target_url
from .states import AttemptOutcome

AmbiguityPolicy = Literal["retry", "hold", "fail"]
DEFAULT_BACKOFF = (60.0, 300.0, 900.0)


def _backoff(raw: str, env: Env) -> tuple[float, ...]:
    try:
        delays = tuple(float(x) for x in raw.split(","))
    except ValueError:
        delays = ()
    if not delays or any(d <= 0 for d in delays):
        raise ValueError("must be positive numbers, e.g. 60,300,900")
    return delays


@dataclass(frozen=True)
class ChannelPolicy:
    ambiguity: AmbiguityPolicy = setting(
        "AMBIGUOUS_POLICY_{key}",
        "hold",
        choices=("retry", "hold", "fail"),
        help="after a may-have-been-sent {key} outcome: `retry` after the hold, `hold` for the operator, or `fail`",
    )
    hold_seconds: float = setting(
        "AMBIGUOUS_HOLD_SECONDS_{key}",
        300.0,
        help="how long an ambiguous {key} delivery waits: never an immediate resend",
    )


@dataclass(frozen=True)
class RetryPolicy:
    backoff: tuple[float, ...] = setting(
        "RETRY_BACKOFF_SECONDS",
        DEFAULT_BACKOFF,
        parse=_backoff,
        help="after a transient failure (±10 % jitter; a provider's `Retry-After` is honoured)",
    )
    jitter: float = 0.1  # +-10 % so a burst of failures does not retry in lockstep
    channels: Mapping[str, ChannelPolicy] = each(
        ChannelPolicy,
        {
            "email": ChannelPolicy("retry", 300.0),
            "sms": ChannelPolicy("hold", 300.0),
            # no idempotency key on Twilio's message or call create either: a duplicate code or call
            "whatsapp": ChannelPolicy("hold", 300.0),
            "voice": ChannelPolicy("hold", 300.0),
            # webhook events: the receiver deduplicates on webhook-id, so an ambiguous send is resent
            "webhook": ChannelPolicy("retry", 60.0),
        },
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
        resend), nothing for a final outcome. outbox/queries/settle.sql:settle decides whether the intent goes on at all."""
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


def _days_or_until_cleared(raw: str, env: Env) -> float | None:
    return number(raw) or None  # 0: until cleared


@dataclass(frozen=True)
class FailurePolicy:
    suppress_days: float | None = setting(
        "SUPPRESSION_DAYS",
        None,
        parse=_days_or_until_cleared,
        minimum=0,
        shown_default="unset (until cleared)",
        help="how long a destination whose delivery failed for the recipient's fault is refused "
        '(docs/security.md, "The suppression list"); `0` or unset: until `verifyctl suppression clear`',
    )
    hold_after: int = setting(
        "CHANNEL_HOLD_AFTER_FAULTS",
        3,
        minimum=1,
        help="that many faults of our account (credentials, suspension, quota) within `CHANNEL_HOLD_WINDOW_SECONDS` "
        "hold the channel (its deliveries wait, none fails; `status` alerts)",
    )
    hold_window_seconds: float = setting(
        "CHANNEL_HOLD_WINDOW_SECONDS", 600.0, above=0, help="the window a channel's or a route's faults are counted in"
    )
    hold_seconds: float = setting(
        "CHANNEL_HOLD_SECONDS",
        1800.0,
        above=0,
        help="how long a hold of a channel or a route lasts, unless `verifyctl channel resume` ends it",
    )
    route_min_destinations: int = setting(
        "ROUTE_HOLD_MIN_DESTINATIONS",
        5,
        minimum=2,
        help="a route (an SMS destination country, an email receiving domain) is held only when its faults within "
        "`CHANNEL_HOLD_WINDOW_SECONDS` came from at least this many distinct destinations, and as many accounts",
    )
    route_min_share: float = setting(
        "ROUTE_HOLD_MIN_SHARE",
        0.5,
        above=0,
        maximum=1,
        help="a route is held only when its faults also make up at least this share of its recent sends (a few "
        "destinations someone chose cannot hold a route that works for everyone else)",
    )

    @property
    def suppress_seconds(self) -> float | None:
        return None if self.suppress_days is None else self.suppress_days * 86400.0

    def parameters(self) -> dict[str, float | int | None]:
        """The statements' parameters (outbox/queries/settle.sql:settle, delivery/queries/reports.sql:reports_ingest)."""
        return {
            "suppress_seconds": self.suppress_seconds,
            "hold_after": self.hold_after,
            "hold_window": self.hold_window_seconds,
            "hold_seconds": self.hold_seconds,
            "route_min_destinations": self.route_min_destinations,
            "route_min_share": self.route_min_share,
        }


@dataclass(frozen=True)
class NudgeConfig:
    """Create nudges dispatch (outbox/nudge.py): the create target enqueues at most one named task per
    `DISPATCH_NUDGE_SECONDS` that starts a dispatch invocation, so a fresh verification does not wait
    for the scheduler's next tick nor for an invocation kept open (infra's small tier). The dispatch
    target reads `service_account` too: the one identity its nudge path accepts."""

    url: str | None = setting(
        "DISPATCH_NUDGE_URL",
        None,
        parse=target_url,
        shown_default="unset (`verifyctl dev`: its dispatch target)",
        help="the dispatch target's URL: with it, every created verification nudges dispatch (at most one task "
        "per `DISPATCH_NUDGE_SECONDS`, named, so concurrent creates make one). Without a queue the local stand-in "
        "POSTs there itself (refused in production)",
    )
    queue: str | None = setting(
        "DISPATCH_NUDGE_QUEUE",
        None,
        parse=queue_name,
        help="`projects/P/locations/L/queues/Q`: nudge through this Cloud Tasks queue (infra's small tier sets it)",
    )
    service_account: str | None = setting(
        "DISPATCH_NUDGE_SERVICE_ACCOUNT",
        None,
        help="whose OIDC token the nudge tasks carry; on the dispatch target, the one identity its nudge path "
        "accepts (infra sets both)",
    )
    seconds: float = setting(
        "DISPATCH_NUDGE_SECONDS",
        1.0,
        above=0,
        maximum=60,
        help="the nudge's time bucket: the first create of each bucket enqueues the task that starts dispatch at "
        "the bucket's end, so a message waits at most this long for its nudge",
    )
    api_url: str = CLOUD_TASKS_API.field()
    production: bool = production_flag()  # the local stand-in (no queue) is refused there

    def __post_init__(self) -> None:
        problems = []
        if self.queue and not self.url:  # the service account alone: the dispatch target's (whom it accepts)
            problems.append("DISPATCH_NUDGE_QUEUE needs DISPATCH_NUDGE_URL")
        if self.queue and not self.service_account:
            problems.append("DISPATCH_NUDGE_QUEUE needs DISPATCH_NUDGE_SERVICE_ACCOUNT (the tasks' OIDC identity)")
        if self.production and self.url and not self.queue:
            problems.append("in production DISPATCH_NUDGE_URL must go through DISPATCH_NUDGE_QUEUE")
        if problems:
            raise ConfigError("; ".join(problems), tuple(problems))

    @property
    def enabled(self) -> bool:
        return bool(self.url)
