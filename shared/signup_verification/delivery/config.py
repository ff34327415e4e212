"""The delivery worker's configuration (README, "Dispatch configuration"); config/ builds it.

Light on purpose: config/ reads it on every target's start. The defaults of the provider limits
and the reasons for each are in docs/capacity.md ("The dispatcher's ceiling").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..outbox.failure_policy import FailurePolicy
from .message_config import MessageConfig

CHANNELS = ("email", "sms", "webhook")
# The most sends in flight per channel in one invocation. 128 emails in flight at a 200 ms provider
# are up to 640 sends/s, more than one vCPU renders and posts (~300-400/s: bench/dispatch_bench.py),
# so the instance, not the setting, is the ceiling; a send in flight costs ~60 KB of memory
# (bench/memory_bench.py). SMS are paced to the sender's MPS long before 32 are in flight.
DEFAULT_SEND_CONCURRENCY_MAX = {"email": 128, "sms": 32, "webhook": 32}
# What SendGrid documented for v3 mail send (up to 10,000 requests per second); its rate-limit page
# now names no figure and signals the limit with 429 and X-RateLimit-Reset, which pacing follows.
DEFAULT_EMAIL_MAX_PER_SECOND = 10_000.0
# Twilio documents no account-wide request rate for Messages, only per-sender rates; the fastest,
# a short code, is about 100 segments per second.
DEFAULT_SMS_MAX_PER_SECOND = 100.0
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

    email_max_per_second: float | None = DEFAULT_EMAIL_MAX_PER_SECOND  # EMAIL_MAX_PER_SECOND
    sms_max_per_second: float | None = DEFAULT_SMS_MAX_PER_SECOND  # SMS_MAX_PER_SECOND: Twilio API requests
    # TWILIO_SENDER_MPS: message segments per second TWILIO_FROM (a number or a Messaging Service)
    # may send; default by the sender's kind (documented_sender_mps). None: not Twilio, no limit.
    twilio_sender_mps: float | None = None

    def requests_per_second(self, channel: str) -> float | None:
        return {"email": self.email_max_per_second, "sms": self.sms_max_per_second}.get(channel)


@dataclass(frozen=True)
class FanoutConfig:
    """More dispatch invocations when one is not enough (delivery/fanout.py, platform/tasks.py)."""

    max_parallel: int = 4  # DISPATCH_MAX_PARALLEL: fan-out invocations at once (the queue's bound); 0: none
    # DISPATCH_FANOUT_QUEUE: projects/P/locations/L/queues/Q: start them as Cloud Tasks HTTP tasks.
    queue: str | None = None
    # DISPATCH_FANOUT_URL: the dispatch target's URL: the tasks' target and their OIDC audience.
    # Without a queue, the local stand-in POSTs there itself (verifyctl dev).
    url: str | None = None
    service_account: str | None = None  # DISPATCH_FANOUT_SERVICE_ACCOUNT: whose OIDC token the tasks carry
    # DISPATCH_FANOUT_DRAIN_SECONDS: fan out when one invocation would take longer than this to send the
    # backlog (well inside the link TTL and the oldest-ready page).
    drain_seconds: float = 10.0

    @property
    def enabled(self) -> bool:
        return bool(self.url) and self.max_parallel > 0


@dataclass(frozen=True)
class DispatchConfig:
    deployment: str = "local"  # DEPLOYMENT: names the heartbeat and the lease owners
    production: bool = False  # fault injection is never armed in production
    function_timeout_seconds: float = 60  # FUNCTION_TIMEOUT_SECONDS
    # SEND_CONCURRENCY_MAX_EMAIL / _SMS / _WEBHOOK: the most provider calls in flight per channel in one
    # invocation (SEND_CONCURRENCY sets all three); each batch runs as many as its work needs, up to it.
    send_concurrency_max: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_SEND_CONCURRENCY_MAX))
    send_timeout_seconds: float = 10.0  # SEND_TIMEOUT_SECONDS: per provider call, also capped by the deadline
    max_batch: int = 500  # DISPATCH_MAX_BATCH
    batch_seconds: float = 2.0  # DISPATCH_BATCH_SECONDS: sends of one batch should take about this long
    safety_margin_seconds: float = 5.0  # DISPATCH_SAFETY_MARGIN_SECONDS: kept free at the end of the timeout
    shutdown_grace_seconds: float = 8.0  # SHUTDOWN_GRACE_SECONDS: after SIGTERM, in-flight sends may finish
    # DISPATCH_IDLE_WAIT: an empty outbox does not end the invocation: it polls until near its deadline,
    # so new work is sent within ~a poll interval instead of at the next scheduler tick (on in production).
    idle_wait: bool = False
    idle_poll_seconds: float = 0.25  # DISPATCH_IDLE_POLL_SECONDS
    # SMS_MAX_PER_HOUR: the global SMS budget per UTC hour (SMS pumping). Past it the claim takes no
    # SMS intent until the next hour or `verifyctl sms resume`; email is unaffected.
    sms_max_per_hour: int | None = 1000
    messages: MessageConfig = field(default_factory=MessageConfig)  # what the rendered messages say
    failures: FailurePolicy = field(default_factory=FailurePolicy)  # suppression and channel holds
    pacing: PacingConfig = field(default_factory=PacingConfig)  # provider limits
    fanout: FanoutConfig = field(default_factory=FanoutConfig)  # more invocations for a backlog

    def concurrency(self, channel: str) -> int:
        return self.send_concurrency_max.get(channel, 1)
