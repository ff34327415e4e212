"""The delivery worker: one `dispatch` invocation drains eligible intents until its budget is spent.

    loop:  claim (leased, fenced, committed)  -> suppress the dead (never sent)
           -> begin attempts (fenced, before any network call) -> sends in a bounded pool
           -> settle every outcome in one batched statement -> count stale writes

Database work is per batch, not per intent: claim, begin and settle are three statements
whatever the batch size (plus the heartbeat at most every HEARTBEAT_SECONDS, one per suppression
reason found, one per lease renewal). The transitions themselves live in outbox/transitions.py; this module only drives them.
Draining until the deadline (not one batch per scheduler tick), and with DISPATCH_IDLE_WAIT polling
an empty outbox until then, is what keeps a fresh verification from waiting for the next minute.
"""
from __future__ import annotations

import json
import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from typing import Callable, Mapping

from ..operations import signals
from ..platform.deadline import Deadline
from .budget import SETTLE_RESERVE, LatencyEstimator, invocation_seconds, plan_batch
from .channels.base import Channel
from .config import DispatchConfig
from ..platform.database import Database
from .messages import Renderer
from ..outbox import transitions
from ..outbox.transitions import ClaimedIntent
from .sending import BatchSender, InFlight
from ..outbox.policy import RetryPolicy
from ..verifications.tokens import Keyring

_log = logging.getLogger("signup_verification.delivery.dispatcher")

# Crash points for the fault-injection tests: the process SIGKILLs itself there (never in production).
FAULT_POINTS = ("after_claim", "after_begin", "after_send")
POLL_SECONDS = 0.2  # how often the loop looks at the shutdown flag and the leases while sends run
# last_claim_at feeds an absence alert measured in minutes: one write per few seconds is enough, and
# per batch it was a whole extra commit (bench/throughput_bench.py).
HEARTBEAT_SECONDS = 5.0

_RECORD_CLAIM = """
INSERT INTO worker_heartbeats (name, deployment, last_claim_at, watermark)
VALUES (:name, :deployment, now(), jsonb_build_object('send_latency_seconds', CAST(:latency AS jsonb)))
ON CONFLICT (name) DO UPDATE
   SET last_claim_at = now(),
       watermark = worker_heartbeats.watermark || jsonb_build_object('send_latency_seconds', CAST(:latency AS jsonb))
"""
# Also switches this session to custom plans: the batched transitions join an unnest() of array
# parameters whose length a generic plan cannot know (it assumes 10 rows and picks a nested loop
# that rescans the input per leased row: 500 intents took 300+ ms instead of 40). Planning each
# execution costs well under a millisecond, a few times per batch.
_START = """
SELECT set_config('plan_cache_mode', 'force_custom_plan', false) AS plan_mode,
       (SELECT watermark -> 'send_latency_seconds' FROM worker_heartbeats WHERE name = :name) AS latency
"""
_PLAN_MODE = "SELECT set_config('plan_cache_mode', 'force_custom_plan', false)"
_SAVE_LATENCY = """
UPDATE worker_heartbeats
   SET watermark = watermark || jsonb_build_object('send_latency_seconds', CAST(:latency AS jsonb))
 WHERE name = :name
"""


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


def heartbeat_name(deployment: str) -> str:
    return f"dispatch:{deployment}"


def new_lease_owner(deployment: str) -> str:
    """Unique per invocation: a restarted process or a second invocation never shares a fence."""
    return f"{deployment}:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Dispatcher:
    def __init__(self, db: Database, config: DispatchConfig, policy: RetryPolicy, keyring: Keyring,
                 channels: Mapping[str, Channel], *, stop: threading.Event | None = None,
                 estimator: LatencyEstimator | None = None, clock: Callable[[], float] = time.monotonic,
                 fault: str | None = None):
        self.db = db
        self.config = config
        self.channels = channels
        self.renderer = Renderer(config.messages, keyring)
        self.policy = policy
        self.stop = stop or threading.Event()
        self.estimator = estimator or LatencyEstimator()
        self.clock = clock
        self.owner = new_lease_owner(config.deployment)
        self.fault = None if config.production else (fault or os.environ.get("DISPATCH_FAULT") or None)
        self.report = DispatchReport()
        self.abandoned = 0
        self._stop_seen = False
        self._drained = False  # a claim found nothing eligible
        self._beat_at: float | None = None  # when last_claim_at was last written
        # DISPATCH_SETTLE_CONNECTION: settles run on a second connection, overlapping the next claim
        self._settler: ThreadPoolExecutor | None = None
        self._settle_db: Database | None = None
        self._settling: tuple[list, Future] | None = None

    # -- the invocation -------------------------------------------------------------------------------
    def run(self) -> DispatchReport:
        s = self.config
        self.deadline = Deadline(invocation_seconds(s.function_timeout_seconds, s.safety_margin_seconds), self.clock)
        pool = ThreadPoolExecutor(max_workers=s.send_concurrency, thread_name_prefix="send")
        self.sender = BatchSender(self.channels, self.renderer, pool, s.send_concurrency, self.deadline,
                                  self.estimator, self._stopping, s.send_timeout_seconds)
        try:
            self._start_session()
            self._open_settler()
            self._loop()
            self._collect_settle()
            if self.report.batches:
                self._save_latency()
        finally:
            self._close_settler()
            pool.shutdown(wait=False, cancel_futures=True)
            self.report.elapsed_ms = int((self.clock() - self.deadline.started) * 1000)
            self._log_summary()
        return self.report

    def _loop(self) -> None:
        """Pipelined one batch ahead: while a batch's sends run, the next batch is claimed (not begun:
        on shutdown it is simply released), and the finished batch is settled while the next one's
        sends already run. Only `begin` sits between two batches' sends. With a settle connection, that
        settle also overlaps the next claim (PostgreSQL works on both at once)."""
        running: _Running | None = None
        pending: _Claimed | None = None
        while True:
            if running is None:
                if not (self._drained or self._stopping()):
                    pending = self._claim_next(ahead=0.0)
                if pending is None:
                    if self._drained and not self._stopping() and self._wait_for_work():
                        self._drained = False
                        continue
                    return
                running, pending = self._start(pending), None
                continue
            if pending is None and not self._drained and not self._stopping():
                pending = self._claim_next(ahead=running.expected_seconds)
            outcomes = self._finish(running, pending)
            self._inject("after_send")
            running = None
            if pending is not None:
                running, pending = self._start(pending), None  # its sends overlap this settle
            self._settle(outcomes)

    def _wait_for_work(self) -> bool:
        """The outbox is empty: with DISPATCH_IDLE_WAIT, sleep one poll interval and claim again (an
        empty claim is one probe of the small eligible index), until too little time is left for a
        send. Polling rather than LISTEN: pg8000 has no blocking wait for notifications, and a poll
        also sees work that becomes due by time (retries, holds), which no NOTIFY announces."""
        s = self.config
        if not s.idle_wait:
            return False
        one_send = min(self.estimator.worst(), s.send_timeout_seconds)  # what a batch found next would need
        if self.deadline.remaining() < s.idle_poll_seconds + SETTLE_RESERVE + one_send:
            return False
        self.stop.wait(s.idle_poll_seconds)
        return not self._stopping()

    def _stopping(self) -> bool:
        if self.stop.is_set() and not self._stop_seen:
            self._stop_seen = True
            self.deadline.shorten(self.config.shutdown_grace_seconds)  # in-flight sends get the grace period
            _log.info("dispatch shutting down: no more claims, in-flight sends get %.0fs",
                      self.config.shutdown_grace_seconds)
        return self._stop_seen

    # -- the steps of a batch ------------------------------------------------------------------------------
    def _claim_next(self, ahead: float) -> "_Claimed | None":
        """Claim a batch sized for the time left after `ahead` seconds of work already running;
        suppress its dead intents. None when out of time or out of work (then `_drained`)."""
        s = self.config
        latency = min(self.estimator.worst(), s.send_timeout_seconds)  # a seeded estimate may predate a cap
        plan = plan_batch(self.deadline.remaining() - ahead, latency, s.send_concurrency,
                          s.max_batch, s.batch_seconds)
        if plan is None:
            return None
        claimed = transitions.claim(self.db, self.owner, plan.size, plan.lease_seconds)
        if not claimed and self._settling is not None:
            self._collect_settle()  # its retryable outcomes may be due at once: look again before calling it empty
            claimed = transitions.claim(self.db, self.owner, plan.size, plan.lease_seconds)
        if not claimed:
            self._drained = True
            return None
        self.report.batches += 1
        self.report.claimed += len(claimed)
        self._record_claim()
        self._inject("after_claim")
        return _Claimed(self._suppress_dead(claimed), plan.lease_seconds, plan.expected_seconds)

    def _start(self, claimed: "_Claimed") -> "_Running | None":
        """Begin the attempts (fenced, before any network call) and start their sends."""
        if self._stopping():  # SIGTERM before the sends began: give the work back, not an attempt
            self._release(claimed.live)
            return None
        # Claimed ahead, a batch may have waited behind slow sends: links that died meanwhile are suppressed
        # here, never begun (found by tools/chaos.py: a 30 s link was begun and sent after it expired).
        live = self._suppress_dead(claimed.live)
        if not live:
            return None
        begun = transitions.begin_attempts(self.db, self.owner, [i.fence for i in live])
        self.report.stale_writes += len(live) - len(begun)
        self._inject("after_begin")
        if not begun:
            return None
        by_id = {i.id: i for i in live}
        inflight = self.sender.start([(by_id[b.intent_id], b) for b in begun])
        return _Running(inflight, claimed.lease_seconds, claimed.expected_seconds,
                        self.clock() + claimed.lease_seconds / 2)

    def _finish(self, running: "_Running", pending: "_Claimed | None") -> list:
        """Wait for a batch's sends, renewing the leases (its own and the claimed next batch's) if they run long."""
        inflight = running.inflight
        while not inflight.wait(POLL_SECONDS):
            self._stopping()
            now = self.clock()
            if now >= self.deadline.at:  # a send stuck past every timeout: leave it to the reconciler
                break
            if now >= running.renew_at:
                fences = [intent.fence for intent, _ in inflight.work] + [i.fence for i in (pending.live if pending else [])]
                self._renew(fences, running.lease_seconds)
                running.renew_at = now + running.lease_seconds / 2
        outcomes = inflight.outcomes()
        self.abandoned += len(inflight.work) - len(outcomes)
        return outcomes

    def _suppress_dead(self, claimed: list[ClaimedIntent]) -> list[ClaimedIntent]:
        """Intents whose link would be dead on arrival are suppressed, never sent. A link that expires
        before one provider call could even finish counts as dead already."""
        horizon = datetime.now(timezone.utc) + timedelta(seconds=self.config.send_timeout_seconds)
        dead: dict[str, list] = defaultdict(list)
        live = []
        for intent in claimed:
            reason = intent.dead_reason(horizon)
            if reason is None:
                live.append(intent)
            else:
                dead[reason].append(intent.verification_id)
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

    def _settle(self, outcomes) -> None:
        """Record a batch's outcomes: on the settle connection when there is one (one settle in flight;
        it overlaps the next claim), else here."""
        if not outcomes:
            return
        self._collect_settle()
        settlements = [o.settlement(self.policy) for o in outcomes]
        if self._settler is None:
            self._record_settled(outcomes, transitions.settle(self.db, self.owner, settlements))
        else:
            self._settling = (outcomes, self._settler.submit(transitions.settle, self._settle_db, self.owner, settlements))

    def _collect_settle(self) -> None:
        """Wait for the settle in flight, if any, and count its results (a failure raises here)."""
        if self._settling is not None:
            outcomes, future = self._settling
            self._settling = None
            self._record_settled(outcomes, future.result())

    def _open_settler(self) -> None:
        if self.config.settle_connection:
            self._settle_db = self.db.sibling()
            self._settle_db.run(_PLAN_MODE)
            self._settler = ThreadPoolExecutor(max_workers=1, thread_name_prefix="settle")

    def _close_settler(self) -> None:
        """Never abandon a settle mid-flight: wait for it, then close its connection."""
        if self._settler is None:
            return
        try:
            self._collect_settle()
        except Exception:  # already failing (the loop raised): the outcome is logged, the reconciler recovers
            _log.exception("settle failed while the invocation was ending")
        finally:
            self._settler.shutdown(wait=True)
            self._settle_db.close()
            self._settler = None

    def _record_settled(self, outcomes, applied: set[int]) -> None:
        self.report.stale_writes += len(outcomes) - len(applied)
        for outcome in outcomes:
            if outcome.intent.id in applied:
                status = outcome.final_status
                setattr(self.report, status, getattr(self.report, status) + 1)
            else:
                _log.warning("stale write: intent %s was taken over before its %s outcome was recorded",
                             outcome.intent.id, outcome.result.outcome,
                             extra={"json_fields": {"event": "stale_write", "intent_id": outcome.intent.id}})

    # -- signals for the operator -----------------------------------------------------------------------
    def _record_claim(self) -> None:
        """last_claim_at for this deployment (the signals read it), with the latency estimates that
        seed the next invocation's batch sizing. One statement per HEARTBEAT_SECONDS at most."""
        now = self.clock()
        if self._beat_at is not None and now - self._beat_at < HEARTBEAT_SECONDS:
            return
        self._beat_at = now
        self.db.run(_RECORD_CLAIM, name=heartbeat_name(self.config.deployment), deployment=self.config.deployment,
                    latency=json.dumps(self.estimator.snapshot()))

    def _save_latency(self) -> None:
        """What this invocation measured, for the next one (an instance may be cold)."""
        self.db.run(_SAVE_LATENCY, name=heartbeat_name(self.config.deployment),
                    latency=json.dumps(self.estimator.snapshot()))

    def _start_session(self) -> None:
        """Custom plans for this session, and the last invocation's latency figures."""
        latency = self.db.run(_START, name=heartbeat_name(self.config.deployment))[0][1]
        if isinstance(latency, dict):
            self.estimator.seed(latency)

    def _log_summary(self) -> None:
        fields = {"event": "dispatch_summary", "deployment": self.config.deployment, "lease_owner": self.owner,
                  **self.report.as_dict(), "abandoned": self.abandoned,
                  "send_latency_seconds": self.estimator.snapshot()}
        _log.info("dispatch: %s", " ".join(f"{k}={v}" for k, v in self.report.as_dict().items()),
                  extra={"json_fields": fields})

    def _inject(self, point: str) -> None:
        if self.fault == point:
            _log.warning("DISPATCH_FAULT=%s: killing this process", point)
            os.kill(os.getpid(), signal.SIGKILL)


def dispatch(db: Database, config: DispatchConfig, policy: RetryPolicy, keyring: Keyring,
             channels: Mapping[str, Channel], *, stop: threading.Event | None = None,
             signals_config: signals.SignalsConfig | None = None) -> DispatchReport:
    """One invocation of the worker, closed by its `event="signals"` records (the absence alert reads them).
    The channel adapters live as long as the instance (Runtime owns them: pooled connections are reused)."""
    report = Dispatcher(db, config, policy, keyring, channels, stop=stop).run()
    signals.emit(db, config.deployment, source="dispatch", config=signals_config)
    return report
