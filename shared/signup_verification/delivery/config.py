"""The delivery worker's configuration (README, "Dispatch configuration"); config/ builds it."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..outbox.failure_policy import FailurePolicy
from .message_config import MessageConfig


@dataclass(frozen=True)
class DispatchConfig:
    deployment: str = "local"  # DEPLOYMENT: names the heartbeat and the lease owners
    production: bool = False  # fault injection is never armed in production
    function_timeout_seconds: float = 60  # FUNCTION_TIMEOUT_SECONDS
    send_concurrency: int = 8  # SEND_CONCURRENCY: provider calls in flight per invocation
    send_timeout_seconds: float = 10.0  # SEND_TIMEOUT_SECONDS: per provider call, also capped by the deadline
    max_batch: int = 500  # DISPATCH_MAX_BATCH
    batch_seconds: float = 2.0  # DISPATCH_BATCH_SECONDS: sends of one batch should take about this long
    safety_margin_seconds: float = 5.0  # DISPATCH_SAFETY_MARGIN_SECONDS: kept free at the end of the timeout
    shutdown_grace_seconds: float = 8.0  # SHUTDOWN_GRACE_SECONDS: after SIGTERM, in-flight sends may finish
    # DISPATCH_IDLE_WAIT: an empty outbox does not end the invocation: it polls until near its deadline,
    # so new work is sent within ~a poll interval instead of at the next scheduler tick (on in production).
    idle_wait: bool = False
    idle_poll_seconds: float = 0.25  # DISPATCH_IDLE_POLL_SECONDS
    # SMS_MAX_PER_HOUR: the global SMS budget per UTC hour (SMS pumping, issue 15). Past it the claim
    # takes no SMS intent until the next hour or `verifyctl sms resume`; email is unaffected.
    sms_max_per_hour: int | None = 1000
    messages: MessageConfig = field(default_factory=MessageConfig)  # what the rendered messages say
    failures: FailurePolicy = field(default_factory=FailurePolicy)  # suppression and channel holds
