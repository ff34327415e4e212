"""The delivery worker: one `dispatch` invocation drains eligible intents until its budget is spent.

A two-slot pipeline, one batch ahead:
    pending   claimed and begun in one statement (the fused claim: leased, fenced, its attempt rows
              written, committed), dead intents suppressed, sends not started: on shutdown it is
              released (a 'released' outcome, not an attempt, eligible again at once);
    running   started (fenced, before any network call: a HOT update of sending_at), its sends in a
              bounded pool (sending.py).
Each turn of the loop asks once whether shutdown was requested, then: promote pending to running
(its sends start), settle the batch that just finished, claim the next pending batch, and wait for
the running one. So only `start` sits between two batches' sends, and the settle overlaps the
next batch's sends.

Database work is per batch, not per intent: claim, start and settle are three statements whatever
the batch size (plus the heartbeat at most every HEARTBEAT_SECONDS, one per suppression reason
found, one per lease renewal). The transitions live in outbox/transitions.py, the heartbeat in
outbox/heartbeats.py; this module only drives them. Draining until the deadline (not one batch per
scheduler tick), and with DISPATCH_IDLE_WAIT polling an empty outbox until then, is what keeps a
fresh verification from waiting for the next minute.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import assert_never

from ..outbox import heartbeats, idle, transitions
from ..outbox.config import RetryPolicy
from ..outbox.states import IntentStatus
from ..outbox.transitions import ClaimedIntent
from ..platform.database import Database
from ..platform.deadline import Deadline
from ..verifications.tokens import Keyring
from .batch_sizing import SETTLE_RESERVE, LatencyEstimator, invocation_seconds, plan_batch
from .channels.base import Channel
from .config import DispatchConfig
from .messages import Renderer
from .sending import BatchSender, InFlight, SendOutcome

_log = logging.getLogger("signup_verification.delivery.dispatcher")

# The points a fault hook is called at (the crash tests and tools/chaos.py kill the process there).
FAULT_POINTS = ("after_claim", "after_begin", "after_send")
FaultHook = Callable[[str], None]
POLL_SECONDS = 0.2  # how often the wait for a batch's sends looks at the shutdown flag and the leases


@dataclass
class _Claimed:
    """A claimed batch whose sends have not begun (releasable)."""

    live: list[ClaimedIntent]
    lease_seconds: float
    expected_seconds: float


@dataclass
class _Running:
    """A begun batch whose sends are in flight."""

    inflight: InFlight
    lease_seconds: float
    expected_seconds: float
    renew_at: float


@dataclass
class DispatchReport:
    claimed: int = 0
    accepted: int = 0
    retryable: int = 0
    failed: int = 0
    ambiguous: int = 0
    suppressed: int = 0
    released: int = 0
    stale_writes: int = 0
    batches: int = 0
    elapsed_ms: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    def count(self, settled: IntentStatus) -> None:
        """One settled intent, by the status settle.sql left."""
        match settled:
            case IntentStatus.ACCEPTED:
                self.accepted += 1
            case IntentStatus.RETRYABLE:
                self.retryable += 1
            case IntentStatus.AMBIGUOUS:
                self.ambiguous += 1
            case IntentStatus.FAILED:
                self.failed += 1
            case IntentStatus.READY | IntentStatus.CLAIMED | IntentStatus.ATTEMPTING | IntentStatus.SUPPRESSED:
                raise ValueError(f"settle never leaves an intent {settled}")
            case _:
                assert_never(settled)


def new_lease_owner(deployment: str) -> str:
    """Unique per invocation: a restarted process or a second invocation never shares a fence."""
    return f"{deployment}:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Dispatcher:
    def __init__(
        self,
        db: Database,
        config: DispatchConfig,
        policy: RetryPolicy,
        keyring: Keyring,
        channels: Mapping[str, Channel],
        *,
        stop: threading.Event | None = None,
        estimator: LatencyEstimator | None = None,
        clock: Callable[[], float] = time.monotonic,
        fault: FaultHook | None = None,
    ):
        self.db = db
        self.config = config
        self.policy = policy
        self.channels = channels
        self.renderer = Renderer(config.messages, keyring)
        self.stop = stop or threading.Event()
        self.estimator = estimator or LatencyEstimator()
        self.clock = clock
        self.fault = fault
        self.owner = new_lease_owner(self.config.deployment)
        self.report = DispatchReport()
        self.abandoned = 0
        self._drained = False  # a claim found nothing eligible
        self._shutdown_begun = False
        self._idle_entered = False  # this invocation registered as the deployment's idle waiter (outbox/idle.py)
        self._beat = heartbeats.ClaimBeat(db, self.config.deployment, clock)

    # -- the invocation -------------------------------------------------------------------------------
    def run(self) -> DispatchReport:
        o = self.config
        self.deadline = Deadline(invocation_seconds(o.function_timeout_seconds, o.safety_margin_seconds), self.clock)
        pool = ThreadPoolExecutor(max_workers=o.send_concurrency, thread_name_prefix="send")
        self.sender = BatchSender(
            self.channels,
            self.renderer,
            pool,
            o.send_concurrency,
            self.deadline,
            self.estimator,
            self.stop,
            o.send_timeout_seconds,
        )
        try:
            self.estimator.seed(heartbeats.start_dispatch(self.db, o.deployment))
            self._loop()
            if self.report.batches:
                heartbeats.save_latency(self.db, o.deployment, self.estimator.snapshot())
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            self.report.elapsed_ms = int((self.clock() - self.deadline.started) * 1000)
            self._log_summary()
        return self.report

    def _loop(self) -> None:
        running: _Running | None = None
        pending: _Claimed | None = None
        finished: list[SendOutcome] = []  # the outcomes of the batch that just ended, not yet settled
        while True:
            stopping = self._stop_requested()
            if stopping:
                self._begin_shutdown()
                if pending is not None:  # SIGTERM before its sends began: give the work back, not an attempt
                    self._release(pending.live)
                    pending = None
            if running is None and pending is not None:
                running, pending = self._start(pending), None  # its sends overlap the settle below
            if finished:
                self._settle(finished)
                finished = []
            if pending is None and not (stopping or self._drained):
                pending = self._claim_next(ahead=running.expected_seconds if running else 0.0)
            if running is not None:
                finished = self._finish(running, pending)
                self._fault("after_send")
                running = None
            elif pending is None:  # nothing running, nothing claimed: out of work or out of time
                if stopping or not (self._drained and self._wait_for_work()):
                    return
                self._drained = False

    # -- shutdown ---------------------------------------------------------------------------------------
    def _stop_requested(self) -> bool:
        return self.stop.is_set()

    def _begin_shutdown(self) -> None:
        """No more claims; the sends in flight get the grace period (the deadline moves closer, once)."""
        if self._shutdown_begun:
            return
        self._shutdown_begun = True
        self.deadline.shorten(self.config.shutdown_grace_seconds)
        _log.info(
            "dispatch shutting down: no more claims, in-flight sends get %.0fs", self.config.shutdown_grace_seconds
        )

    def _wait_for_work(self) -> bool:
        """The outbox is empty: with DISPATCH_IDLE_WAIT, probe it every poll interval (outbox/idle.py:
        one probe of the eligible index, nothing claimed) until work is waiting (True: claim it), a
        shutdown is asked for (True: the loop handles it), a newer invocation has started waiting
        (False: it takes over), or too little time is left for a send (False). The probes run at a
        fixed rate, so new work waits at most one interval plus a probe. Polling rather than LISTEN:
        pg8000 has no blocking wait for notifications, and a poll also sees work that becomes due by
        time (retries, holds), which no NOTIFY announces."""
        o = self.config
        if not o.idle_wait:
            return False
        name = heartbeats.dispatch_name(o.deployment)
        if not self._idle_entered:
            self._idle_entered = True
            idle.enter(self.db, name, o.deployment, self.owner, self.clock() - self.deadline.started)
        one_send = min(self.estimator.worst(), o.send_timeout_seconds)  # what a batch found next would need
        next_probe = self.clock() + o.idle_poll_seconds
        while self.deadline.remaining() >= o.idle_poll_seconds + SETTLE_RESERVE + one_send:
            if self.stop.wait(max(0.0, next_probe - self.clock())):
                return True
            next_probe = max(next_probe + o.idle_poll_seconds, self.clock())  # fixed rate; never a burst after a stall
            found = idle.probe(self.db, name, self.owner, o.sms_max_per_hour)
            if found.waiting:
                return True
            if found.superseded:
                _log.debug("dispatch: a newer invocation is waiting for work; this one returns")
                return False
        return False

    # -- the steps of a batch ------------------------------------------------------------------------------
    def _claim_next(self, ahead: float) -> _Claimed | None:
        """Claim a batch sized for the time left after `ahead` seconds of work already running;
        suppress its dead intents. None when out of time or out of work (then `_drained`)."""
        o = self.config
        latency = min(self.estimator.worst(), o.send_timeout_seconds)  # a seeded estimate may predate a cap
        plan = plan_batch(self.deadline.remaining() - ahead, latency, o.send_concurrency, o.max_batch, o.batch_seconds)
        if plan is None:
            return None
        claimed = self._claim(plan.size, plan.lease_seconds)
        if not claimed:
            self._drained = True
            return None
        self.report.batches += 1
        self.report.claimed += len(claimed)
        self._record_claim()
        self._fault("after_claim")
        return _Claimed(self._suppress_dead(claimed), plan.lease_seconds, plan.expected_seconds)

    def _claim(self, size: int, lease_seconds: float) -> list[ClaimedIntent]:
        """The fused claim: live intents come back begun (their sends not started)."""
        o = self.config
        return transitions.claim(
            self.db, self.owner, size, lease_seconds, o.sms_max_per_hour, begin=True, dead_within=o.send_timeout_seconds
        )

    def _start(self, claimed: _Claimed) -> _Running | None:
        """Start the sends of the attempts the claim began (fenced, before any network call); an intent
        the claim left unbegun is begun the two-step way."""
        # Claimed ahead, a batch may have waited behind slow sends: links that died meanwhile are released
        # and suppressed here, never sent (found by tools/chaos.py: a 30 s link was begun and sent after it expired).
        live = self._suppress_dead(claimed.live)
        if not live:
            return None
        begun = transitions.start(self.db, self.owner, [i.fence for i in live if i.begun])
        begun += transitions.begin_attempts(self.db, self.owner, [i.fence for i in live if not i.begun])
        self.report.stale_writes += len(live) - len(begun)
        self._fault("after_begin")
        if not begun:
            return None
        by_id = {i.id: i for i in live}
        inflight = self.sender.start([(by_id[b.intent_id], b) for b in begun])
        return _Running(
            inflight, claimed.lease_seconds, claimed.expected_seconds, self.clock() + claimed.lease_seconds / 2
        )

    def _finish(self, running: _Running, pending: _Claimed | None) -> list[SendOutcome]:
        """Wait for a batch's sends, renewing the leases (its own and the claimed next batch's) if they
        run long. A shutdown requested meanwhile moves the deadline closer at once (the grace period
        starts with the signal, not with the next turn of the loop)."""
        inflight = running.inflight
        while not inflight.wait(POLL_SECONDS):
            if self._stop_requested():
                self._begin_shutdown()
            now = self.clock()
            if now >= self.deadline.at:  # a send stuck past every timeout: leave it to the reconciler
                break
            if now >= running.renew_at:
                ahead = pending.live if pending else []
                fences = [intent.fence for intent, _ in inflight.work] + [i.fence for i in ahead]
                self._renew(fences, running.lease_seconds)
                running.renew_at = now + running.lease_seconds / 2
        outcomes = inflight.outcomes()
        self.abandoned += len(inflight.work) - len(outcomes)
        return outcomes

    def _suppress_dead(self, claimed: list[ClaimedIntent]) -> list[ClaimedIntent]:
        """Intents whose link would be dead on arrival are suppressed, never sent. A link that expires
        before one provider call could even finish counts as dead already."""
        horizon = datetime.now(UTC) + timedelta(seconds=self.config.send_timeout_seconds)
        dead: dict[str, list] = defaultdict(list)
        live, begun_dead = [], []
        for intent in claimed:
            reason = intent.dead_reason(horizon)
            if reason is None:
                live.append(intent)
            else:
                dead[reason].append(intent.verification_id)
                if intent.begun:
                    begun_dead.append(intent.fence)
        if begun_dead:  # begun by the claim, died before its send: end the attempt ('released') first
            self.report.stale_writes += len(begun_dead) - len(transitions.release(self.db, self.owner, begun_dead))
        for reason, verification_ids in dead.items():
            self.report.suppressed += len(transitions.suppress(self.db, verification_ids, reason))
        return live

    def _release(self, intents: list[ClaimedIntent]) -> None:
        released = transitions.release(self.db, self.owner, [i.fence for i in intents])
        self.report.released += len(released)
        self.report.stale_writes += len(intents) - len(released)

    def _renew(self, fences: list[tuple[int, int]], lease_seconds: float) -> None:
        # Every begun attempt, finished or not: settle needs each lease still current.
        renewed = transitions.renew(self.db, self.owner, fences, lease_seconds)
        if len(renewed) < len(fences):
            _log.warning("lease renewal: %d of %d leases were lost", len(fences) - len(renewed), len(fences))

    def _settle(self, outcomes: Sequence[SendOutcome]) -> None:
        """Record a finished batch's outcomes (one statement) and count them."""
        settlements = [o.settlement(self.policy) for o in outcomes]
        self._tally(outcomes, transitions.settle(self.db, self.owner, settlements, self.config.failures))

    def _tally(self, outcomes: Sequence[SendOutcome], applied: dict[int, str]) -> None:
        """Count a settled batch by the status settle.sql left; an outcome that did not apply is stale."""
        self.report.stale_writes += len(outcomes) - len(applied)
        for outcome in outcomes:
            status = applied.get(outcome.intent.id)
            if status is not None:
                self.report.count(IntentStatus(status))
            else:
                _log.warning(
                    "stale write: intent %s was taken over before its %s outcome was recorded",
                    outcome.intent.id,
                    outcome.result.outcome,
                    extra={"json_fields": {"event": "stale_write", "intent_id": outcome.intent.id}},
                )

    # -- for the operator and the fault tests ---------------------------------------------------------------
    def _record_claim(self) -> None:
        """last_claim_at for this deployment, with the latency estimates so far (throttled)."""
        self._beat.claimed(self.estimator.snapshot())

    def _fault(self, point: str) -> None:
        if self.fault is not None:
            self.fault(point)

    def _log_summary(self) -> None:
        fields = {
            "event": "dispatch_summary",
            "deployment": self.config.deployment,
            "lease_owner": self.owner,
            **self.report.as_dict(),
            "abandoned": self.abandoned,
            "send_latency_seconds": self.estimator.snapshot(),
        }
        r = self.report
        moved = r.claimed or r.released or r.suppressed or r.stale_writes or self.abandoned
        _log.log(
            logging.INFO if moved else logging.DEBUG,  # an idle tick is quiet
            "dispatch: %s",
            " ".join(f"{k}={v}" for k, v in r.as_dict().items()),
            extra={"json_fields": fields},
        )


def dispatch(
    db: Database,
    config: DispatchConfig,
    policy: RetryPolicy,
    keyring: Keyring,
    channels: Mapping[str, Channel],
    *,
    stop: threading.Event | None = None,
    fault: FaultHook | None = None,
) -> DispatchReport:
    """One invocation of the worker. The caller closes it with the `event="signals"` records
    (operations.signals.emit: the absence alert reads them); the channel adapters live as long as the
    instance (Runtime owns them: pooled connections are reused across invocations)."""
    return Dispatcher(db, config, policy, keyring, channels, stop=stop, fault=fault).run()
