"""The dispatch loop's settings: batches, the idle wait, the providers' rates (pacing) and the
fan-out to more invocations (README "Dispatch"; each declared once, platform/settings.py).

Light on purpose, like config.py beside it. The defaults of the provider limits and the reasons for
each are in docs/capacity.md ("The dispatcher's ceiling").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ..outbox.config import FailurePolicy, NudgeConfig
from ..platform.config import CLOUD_TASKS_API, DEPLOYMENT, FUNCTION_TIMEOUT, SHUTDOWN_GRACE, production_flag
from ..platform.errors import ConfigError
from ..platform.settings import each, number, part, plain, setting
from ..platform.tasks import queue_name, target_url
from ..verifications.config import TWILIO_FROM
from .config import SEND_LIMITS, SEND_TIMEOUT, SMS_MAX_PER_HOUR, SMS_TRANSPORT, MessageConfig, SendLimit

# Twilio's documented message segments per second by sender kind (errors 30001 and 21611): a US
# long code 1, a toll-free number 3, a short code about 100. A Messaging Service sends at the sum of
# its senders, which only its owner knows: it counts as one long code until TWILIO_SENDER_MPS says more.
TOLL_FREE = re.compile(r"^\+1(800|833|844|855|866|877|888)\d{7}$")
SHORT_CODE = re.compile(r"^\d{5,6}$")


def documented_sender_mps(sender: str | None) -> float:
    """Twilio's documented segments per second for TWILIO_FROM's kind of sender."""
    sender = (sender or "").strip()
    if SHORT_CODE.match(sender):
        return 100.0
    if TOLL_FREE.match(sender):
        return 3.0
    return 1.0


@dataclass(frozen=True)
class PacingConfig:
    """What the providers accept. Each invocation takes its share of every rate (the fan-out's
    invocations divide it); a 429 slows the channel for every invocation (delivery/pacing.py)."""

    # SendGrid documented up to 10,000 requests per second for v3 mail send; its rate-limit page now
    # names no figure and signals the limit with 429 and X-RateLimit-Reset, which pacing follows.
    email_max_per_second: float = setting(
        "EMAIL_MAX_PER_SECOND",
        10_000.0,
        above=0,
        help="emails per second the deployment may send, shared by its invocations (SendGrid's documented "
        "mail-send limit; lower it for an SMTP relay's). A 429 slows the channel for every invocation by its "
        '`Retry-After` and spends no attempt (docs/capacity.md, "Provider pacing")',
    )
    # Twilio documents no account-wide request rate for Messages, only per-sender rates; the fastest,
    # a short code, is about 100 segments per second.
    sms_max_per_second: float = setting(
        "SMS_MAX_PER_SECOND", 100.0, above=0, help="Twilio Messages API requests per second, shared by the invocations"
    )
    twilio_sender_mps: float | None = setting(
        "TWILIO_SENDER_MPS",
        1.0,
        parse=plain(number),
        above=0,
        default_for=lambda env: documented_sender_mps(env(TWILIO_FROM)),
        when=lambda env: env(SMS_TRANSPORT) == "twilio",  # elsewhere: None, no sender limit
        shown_default="by `TWILIO_FROM`'s kind",
        help="message segments per second the Twilio sender may send (Twilio queues beyond it): a long code 1, "
        "toll-free 3, a short code 100; set it for a Messaging Service (the sum of its senders) or a registered "
        "10DLC number",
    )

    def requests_per_second(self, channel: str) -> float | None:
        return {"email": self.email_max_per_second, "sms": self.sms_max_per_second}.get(channel)


@dataclass(frozen=True)
class FanoutConfig:
    """More dispatch invocations when one is not enough (delivery/fanout.py, platform/tasks.py)."""

    max_parallel: int = setting(
        "DISPATCH_MAX_PARALLEL",
        4,
        minimum=0,
        help="fan-out invocations at once (the queue's `max_concurrent_dispatches`; each holds one database "
        "connection, counted in infra's budget); `0`: no fan-out",
    )
    url: str | None = setting(
        "DISPATCH_FANOUT_URL",
        None,
        parse=target_url,
        shown_default="unset (`verifyctl dev`: its dispatch target)",
        help="the dispatch target's URL: with it, a scheduled invocation whose backlog is more than it can send in "
        "`DISPATCH_FANOUT_DRAIN_SECONDS` starts more invocations of it (the tasks' target and OIDC audience). "
        "Without a queue the local stand-in POSTs there itself (refused in production)",
    )
    queue: str | None = setting(
        "DISPATCH_FANOUT_QUEUE",
        None,
        parse=queue_name,
        help="`projects/P/locations/L/queues/Q`: start them as Cloud Tasks HTTP tasks (infra sets it)",
    )
    service_account: str | None = setting(
        "DISPATCH_FANOUT_SERVICE_ACCOUNT",
        None,
        help="whose OIDC token the tasks carry (infra sets it; needed with `DISPATCH_FANOUT_QUEUE`)",
    )
    drain_seconds: float = setting(
        "DISPATCH_FANOUT_DRAIN_SECONDS",
        10.0,
        above=0,
        help="fan out when one invocation would take longer than this to send the eligible backlog",
    )
    api_url: str = CLOUD_TASKS_API.field()
    production: bool = production_flag()  # the local stand-in (no queue) is refused there

    def __post_init__(self) -> None:
        problems = []
        if (self.queue or self.service_account) and not self.url:
            problems.append("DISPATCH_FANOUT_QUEUE and DISPATCH_FANOUT_SERVICE_ACCOUNT need DISPATCH_FANOUT_URL")
        if self.queue and not self.service_account:
            problems.append("DISPATCH_FANOUT_QUEUE needs DISPATCH_FANOUT_SERVICE_ACCOUNT (the tasks' OIDC identity)")
        if self.production and self.url and not self.queue:
            problems.append("in production DISPATCH_FANOUT_URL must go through DISPATCH_FANOUT_QUEUE")
        if problems:
            raise ConfigError("; ".join(problems), tuple(problems))

    @property
    def enabled(self) -> bool:
        return bool(self.url) and self.max_parallel > 0


@dataclass(frozen=True)
class DispatchConfig:
    deployment: str = DEPLOYMENT.field()  # names the heartbeat and the lease owners
    production: bool = production_flag()  # fault injection is never armed in production
    function_timeout_seconds: float = FUNCTION_TIMEOUT.field()
    send_limits: Mapping[str, SendLimit] = each(SendLimit, SEND_LIMITS)
    send_timeout_seconds: float = SEND_TIMEOUT.field()
    max_batch: int = setting("DISPATCH_MAX_BATCH", 500, minimum=1, help="upper bound on one claim")
    batch_seconds: float = setting(
        "DISPATCH_BATCH_SECONDS",
        2.0,
        above=0,
        help="each batch is sized from the measured send latency so its sends take about this long",
    )
    safety_margin_seconds: float = setting(
        "DISPATCH_SAFETY_MARGIN_SECONDS", 5.0, above=0, help="kept free at the end (at most a quarter of the timeout)"
    )
    shutdown_grace_seconds: float = SHUTDOWN_GRACE.field()
    idle_wait: bool = setting(
        "DISPATCH_IDLE_WAIT",
        False,
        default_for=lambda env: env.production,
        shown_default="`true` in production, else `false`",
        help="when the outbox is empty, keep polling it until near the deadline instead of returning, so new work "
        "is sent within about a poll interval rather than at the next minute's tick; costs one instance kept busy "
        'per deployment (`docs/benchmarks.md`, "Keeping an invocation open"). Works with `verifyctl dev`\'s '
        "scheduler emulation (each call then lasts about `FUNCTION_TIMEOUT_SECONDS`)",
    )
    idle_poll_seconds: float = setting(
        "DISPATCH_IDLE_POLL_SECONDS",
        0.25,
        above=0,
        help="how often an idle invocation looks for work (an empty claim is one probe of the eligible partial index)",
    )
    # Past it the claim takes no SMS intent until the next hour or `verifyctl sms resume`.
    sms_max_per_hour: int | None = SMS_MAX_PER_HOUR.field()
    messages: MessageConfig = part(MessageConfig)  # what the rendered messages say
    failures: FailurePolicy = part(FailurePolicy)  # suppression and channel holds
    pacing: PacingConfig = part(PacingConfig)  # the providers' rates
    fanout: FanoutConfig = part(FanoutConfig)  # more invocations for a backlog
    nudge: NudgeConfig = part(NudgeConfig)  # whose nudges the dispatch target accepts

    def concurrency(self, channel: str) -> int:
        """The most sends of `channel` in flight in this invocation."""
        limit = self.send_limits.get(channel)
        return limit.max_in_flight if limit is not None else 1
