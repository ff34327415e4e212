"""The sends of one batch: render and send each begun attempt in a bounded thread pool.

The pool's threads never touch the database (the dispatch loop owns the connection) and never call
back into the dispatcher: they read the shared deadline and the stop flag, nothing else. Each
returns a `SendOutcome` per intent, so one malformed destination or one failing render affects
only its own intent. A send is not started once shutdown began or when too little time is left
before the deadline for it to finish (it would only turn into an ambiguous timeout): such an
intent is settled `retryable` with error_class `not_sent` and no delay; one whose route is held
(outbox/queries/claim.sql:claim says until when) is `not_sent` until its hold ends.
A send skipped because its channel met an account fault earlier in the invocation (bad credentials,
a suspended account: delivery/classification/) is `channel_stopped`, with the backoff; a route or
message fault stops nothing else and changes no other intent's backoff. None of these was
attempted, so none spends one of the intent's attempts (outbox/queries/settle.sql:settle).

Each channel's sends run from its own queue, as many at once as the batch plan gave it
(delivery/batch_sizing.py), and each takes its turn from the provider pacing first
(delivery/pacing.py): a send whose turn would come too late, or whose channel is slowed down, is
`not_sent` too, eligible again when the provider allows. A provider's 429 (`rate_limited`) was never
processed: it slows the channel and, like `not_sent`, spends no attempt.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from ..outbox.config import RetryPolicy
from ..outbox.states import AttemptOutcome
from ..outbox.transitions import BegunAttempt, ClaimedIntent, Settlement
from ..platform.deadline import Deadline
from ..platform.redaction import mask_destination
from .batch_sizing import LatencyEstimator, send_by
from .channels.base import Channel, SendResult
from .messages import Renderer, RenderError
from .pacing import Pacer

_log = logging.getLogger("signup_verification.delivery.sending")
NOT_SENT = "not_sent"
CHANNEL_STOPPED = "channel_stopped"
RATE_LIMITED = "rate_limited"  # the provider's 429 / Twilio 20429: refused before processing
# retryable outcomes that spend no attempt: never handed to a provider, or refused unprocessed
# never handed to the provider: not charged an attempt, nor a place in the SMS budget (sms_budget_left)
NOT_ATTEMPTED = frozenset({NOT_SENT, CHANNEL_STOPPED, RATE_LIMITED})


@dataclass(frozen=True)
class SendOutcome:
    intent: ClaimedIntent
    attempt: BegunAttempt
    result: SendResult
    segments: int | None = None
    channel_called: bool = False

    def settlement(self, policy: RetryPolicy) -> Settlement:
        """The outcome as the outbox records it; the delay is the policy's (outbox/config.py), and
        what the outcome does to the intent is outbox/queries/settle.sql:settle's."""
        result, intent = self.result, self.intent
        if self.attempted:
            delay = policy.settle_delay(result.outcome, intent.channel, self.attempt.attempt_number, result.retry_after)
        elif result.error_class == CHANNEL_STOPPED:  # the backoff: the channel's fault may last
            delay = policy.retry_delay(self.attempt.attempt_number, result.retry_after)
        else:  # eligible again as soon as the provider allows (a slow-down), else at once
            delay = result.retry_after or 0.0
        verdict = result.verdict if result.outcome is AttemptOutcome.FAILED else None
        return Settlement(
            intent.id,
            intent.lease_version,
            result.outcome,
            delay,
            result.error_class,
            result.detail,
            result.provider_ref,
            self.segments,
            attempted=self.attempted,
            category=verdict.category.value if verdict else None,
            code=verdict.code if verdict else None,
            provider=verdict.provider if verdict else None,
            fault=verdict.fault.value if verdict else None,
            scope=verdict.scope.value if verdict else None,
        )

    @property
    def attempted(self) -> bool:
        """False for a send never handed to the provider: it does not count against max_attempts."""
        return not (self.result.outcome is AttemptOutcome.RETRYABLE and self.result.error_class in NOT_ATTEMPTED)


class InFlight:
    """The running sends of one batch."""

    def __init__(
        self,
        work: Sequence[tuple[ClaimedIntent, BegunAttempt]],
        futures: list[Future],
        results: list[SendOutcome | None],
    ):
        self.work = work
        self._futures = futures
        self._results = results

    def wait(self, timeout: float) -> bool:
        done, pending = wait(self._futures, timeout=max(0.0, timeout), return_when=FIRST_EXCEPTION)
        return not pending

    def outcomes(self) -> list[SendOutcome]:
        """Finished sends; one still running past the deadline is left to the reconciler."""
        return [r for r in self._results if r is not None]


class BatchSender:
    def __init__(
        self,
        channels: Mapping[str, Channel],
        renderer: Renderer,
        pool: ThreadPoolExecutor,
        deadline: Deadline,
        estimator: LatencyEstimator,
        stop: threading.Event,
        send_timeout: float,
        pacer: Pacer,
    ):
        self.channels = channels
        self.renderer = renderer
        self.pool = pool
        self.pacer = pacer
        self.deadline = deadline
        self.estimator = estimator
        self.stop = stop  # only read here: once set, no send starts (the dispatch loop owns the shutdown)
        self.send_timeout = send_timeout
        self.broken: set[str] = set()  # channels that met an account fault (or a provider's block) this invocation
        self._broken_lock = threading.Lock()

    def start(self, work: Sequence[tuple[ClaimedIntent, BegunAttempt]], inflight: Mapping[str, int]) -> InFlight:
        """Each channel's sends from its own queue, `inflight[channel]` of them at once."""
        results: list[SendOutcome | None] = [None] * len(work)
        queues: dict[str, queue.SimpleQueue[int]] = {}
        for index, (intent, _) in enumerate(work):
            queues.setdefault(intent.channel, queue.SimpleQueue()).put(index)
        futures = [
            self.pool.submit(self._drain, work, todo, results)
            for channel, todo in queues.items()
            for _ in range(max(1, min(inflight.get(channel, 1), todo.qsize())))
        ]
        return InFlight(work, futures, results)

    def _drain(self, work, todo: queue.SimpleQueue, results: list) -> None:
        while True:
            try:
                index = todo.get_nowait()
            except queue.Empty:
                return
            intent, attempt = work[index]
            try:
                results[index] = self.send_one(intent, attempt)
            except Exception as exc:  # a bug before the provider was called (send_one guards the call itself)
                _log.error("sending intent %s failed before the provider call: %s", intent.id, type(exc).__name__)
                results[index] = SendOutcome(
                    intent, attempt, SendResult.retryable("internal_error", type(exc).__name__)
                )

    # -- one intent ---------------------------------------------------------------------------------
    def _time_for_send(self, channel: str) -> bool:
        needed = min(self.estimator.estimate(channel) * 1.5, self.send_timeout)
        return send_by(self.deadline) - time.monotonic() >= max(needed, 0.05)

    def send_one(self, intent: ClaimedIntent, attempt: BegunAttempt) -> SendOutcome:
        if self.stop.is_set():
            return SendOutcome(intent, attempt, SendResult.retryable(NOT_SENT, "shutting down before the send started"))
        if not self._time_for_send(intent.channel):
            return SendOutcome(intent, attempt, SendResult.retryable(NOT_SENT, "no time left in this invocation"))
        if not intent.is_event and intent.expires_at <= datetime.now(UTC) + timedelta(seconds=self.send_timeout):
            # Queued behind slow sends of its batch, the link would arrive dead (or die in flight): never handed
            # to the provider; the next claim suppresses it as expired.
            return SendOutcome(
                intent, attempt, SendResult.retryable(NOT_SENT, "the link expires before a send could finish")
            )
        hold_left = intent.route_held_for()
        if hold_left is not None:  # its route is held (route faults from several destinations): wait, unsent
            detail = "not sent: the route of its destination is held"
            return SendOutcome(intent, attempt, SendResult.retryable(NOT_SENT, detail, retry_after=hold_left))
        channel = self.channels.get(intent.channel)
        if channel is None:
            return SendOutcome(
                intent, attempt, SendResult.configuration(f"no adapter for channel {intent.channel!r}", None)
            )
        if intent.channel in self.broken:
            # Do not hammer a provider with credentials it just refused (that can get the sender blocked).
            return SendOutcome(
                intent,
                attempt,
                SendResult.retryable(
                    CHANNEL_STOPPED,
                    f"not attempted: the {channel.transport} transport met a fault of our account "
                    "earlier in this invocation",
                ),
            )
        try:
            message = self.renderer.render(intent, attempt)
        except RenderError as exc:
            return SendOutcome(intent, attempt, SendResult.failed(exc.error_class, exc.detail, exc.verdict))
        segments = getattr(message, "segments", None)
        held = self._take_turn(intent, attempt, segments or 1)
        if held is not None:
            return held
        started = time.monotonic()
        try:
            result = channel.send(message, send_by(self.deadline))
        except Exception as exc:  # an adapter bug: it may have sent, so it is ambiguous; no message text logged
            _log.error(
                "channel adapter raised %s for intent %s:\n%s",
                type(exc).__name__,
                intent.id,
                "".join(traceback.format_tb(exc.__traceback__)),
                extra={"json_fields": {"event": "adapter_error", "intent_id": intent.id}},
            )
            result = SendResult.ambiguous("adapter_error", f"adapter raised {type(exc).__name__}")
        # Capped at the send timeout: a longer elapsed time means this process was stalled (frozen, starved),
        # not a slow provider; uncapped, one stall poisoned the saved estimate and no batch fit any more.
        self.estimator.observe(intent.channel, min(time.monotonic() - started, self.send_timeout))
        if result.stops_channel:
            with self._broken_lock:
                self.broken.add(intent.channel)
        if result.outcome is AttemptOutcome.RETRYABLE and result.error_class == RATE_LIMITED:
            # every sender of the channel (and, once published, every invocation) waits it out; so does this intent
            pause = self.pacer.slow_down(intent.channel, result.retry_after, f"{channel.transport}: {result.detail}")
            result = replace(result, retry_after=pause)
        self._log_outcome(intent, attempt, channel, result)
        return SendOutcome(intent, attempt, result, segments, channel_called=True)

    def _take_turn(self, intent: ClaimedIntent, attempt: BegunAttempt, segments: int) -> SendOutcome | None:
        """Wait for this send's turn in the provider's pace; an outcome instead when it must not start:
        the channel is slowed down (eligible again when the provider allows), its turn comes too late
        for this invocation, or shutdown began while it waited."""
        permit = self.pacer.permit(intent.channel, segments)
        if permit.paused:
            detail = "not sent: the provider asked us to slow down"
            return SendOutcome(intent, attempt, SendResult.retryable(NOT_SENT, detail, retry_after=permit.wait))
        if permit.wait <= 0:
            return None
        needed = min(self.estimator.estimate(intent.channel), self.send_timeout)
        if time.monotonic() + permit.wait + needed > send_by(self.deadline):
            self.pacer.cancel(permit)
            detail = "not sent: the provider's rate allows no turn before this invocation ends"
            return SendOutcome(intent, attempt, SendResult.retryable(NOT_SENT, detail))
        if self.stop.wait(permit.wait):
            self.pacer.cancel(permit)
            return SendOutcome(intent, attempt, SendResult.retryable(NOT_SENT, "shutting down before the send started"))
        return None

    @staticmethod
    def _log_outcome(intent: ClaimedIntent, attempt: BegunAttempt, channel: Channel, result: SendResult) -> None:
        if result.outcome is AttemptOutcome.ACCEPTED:
            return
        fields = {
            "event": "send_outcome",
            "intent_id": intent.id,
            "attempt_id": attempt.attempt_id,
            "channel": intent.channel,
            "transport": channel.transport,
            "outcome": result.outcome,
            "error_class": result.error_class,
            "destination": mask_destination(intent.channel, intent.destination),
        }
        if result.stops_channel:
            # Loud: a bad credential (or a provider's block) fails every send of the channel until it is fixed.
            alert = "channel_configuration" if result.is_configuration_error else result.error_class
            _log.error(
                "%s transport %s: %s",
                channel.transport,
                "configuration error" if result.is_configuration_error else "blocked by the provider",
                result.detail,
                extra={"json_fields": {**fields, "alert": alert}},
            )
        elif result.outcome is AttemptOutcome.AMBIGUOUS and intent.ambiguous_count >= 1:
            _log.warning(
                "intent %s oscillates between ambiguous and retry (%d ambiguous before this one): %s",
                intent.id,
                intent.ambiguous_count,
                result.detail,
                extra={
                    "json_fields": {
                        **fields,
                        "flag": "ambiguous_oscillation",
                        "ambiguous_count": intent.ambiguous_count + 1,
                    }
                },
            )
        else:
            _log.warning(
                "%s %s for intent %s: %s",
                intent.channel,
                result.outcome,
                intent.id,
                result.detail,
                extra={"json_fields": fields},
            )
