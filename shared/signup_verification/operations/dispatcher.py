"""The delivery worker: one `dispatch` invocation drains eligible intents until its budget is spent.

`dispatch(run)` is the whole invocation, whoever starts it (the dispatch target, `verifyctl
dispatch`, a fan-out or nudge task): its context is one DispatchRun (dispatch_run.py: the instance's
connection, config, keyring and channel adapters, who started it, the hooks). It runs the pipeline
below, then closes the run as a reconcile run is closed (reconciler/runner.py): the deployment's
heartbeat (its last completed run, which `verifyctl status` shows) and one `event="signals"` record
per channel (the absence alert reads them). Once shutdown began (SIGTERM) the channel adapters are
closed (SMTP says QUIT); otherwise the next invocation reuses their connections. An invocation the
scheduler or a create's nudge started may start more (delivery/fanout.py) through `run.tasks`, the
platform seam (platform/tasks.py); without one, the instance's own is built from DISPATCH_FANOUT_*
(none when fan-out is off). A fan-out invocation starts none; one whose slot it cannot claim raises
fanout.SlotNotClaimed before anything ran, and writes no heartbeat and no signals either. A nudged
invocation first asks whether a claim would find anything (one probe of the eligible index,
outbox/idle.py): on an empty outbox it answers an empty report and writes nothing, so a nudge that
came late, twice or from a forger costs one read.

A two-slot pipeline, one batch ahead:
    pending   claimed and begun in one statement (the fused claim: leased, fenced, its attempt rows
              written, committed), dead intents suppressed, sends not started: on shutdown it is
              released (a 'released' outcome, not an attempt, eligible again at once);
    running   started (fenced, before any network call: a HOT update of sending_at), its sends in a
              bounded pool.
Each turn of the loop asks once whether shutdown was requested, then: promote pending to running
(its sends start), settle the batch that just finished, claim the next pending batch, and wait for
the running one. So only `start` sits between two batches' sends, and the settle overlaps the
next batch's sends.

Each batch is sized per channel (delivery/batch_sizing.py: its latency, its most sends in flight,
its share of the provider's rate) and runs as many sends at once as it holds, up to that maximum;
the senders (delivery/sending.py) take their turns from the provider pacing (delivery/pacing.py),
and a provider's 429 met by one of them is written for every invocation's claim while its sends wait.

Database work is per batch, not per intent: claim, start and settle are three statements whatever
the batch size (plus the heartbeat at most every HEARTBEAT_SECONDS, one per suppression reason
found, one per lease renewal, one per slow-down, and the fan-out's few: delivery/fanout.py). The transitions
live in outbox/transitions.py, the heartbeat in outbox/heartbeats.py; this module only drives them.
Draining until the deadline (not one batch per scheduler tick), and with DISPATCH_IDLE_WAIT waiting
on an empty outbox until then (idle_wait.py), is what keeps a fresh verification from waiting for
the next minute; the fan-out is what keeps a backlog from waiting for one invocation.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ..delivery import fanout, pacing
from ..delivery.batch_sizing import (
    ChannelBudget,
    LatencyEstimator,
    batch_seconds_of,
    budget,
    invocation_seconds,
    plan_batch,
)
from ..delivery.fanout import SCHEDULED, Fanout
from ..delivery.messages import Renderer
from ..delivery.sending import BatchSender, InFlight, SendOutcome
from ..outbox import heartbeats, idle, transitions
from ..outbox.transitions import ClaimedIntent
from ..platform.deadline import Deadline
from . import idle_wait, signal_records
from .dispatch_report import DispatchReport
from .dispatch_run import FAULT_POINTS, DispatchRun, new_lease_owner

_log = logging.getLogger("signup_verification.operations.dispatcher")
__all__ = ["DispatchReport", "DispatchRun", "Dispatcher", "FAULT_POINTS", "dispatch", "new_lease_owner"]

POLL_SECONDS = 0.2  # how often the wait for a batch's sends looks at the shutdown flag and the leases


@dataclass
class _Claimed:
    """A claimed batch whose sends have not begun (releasable)."""

    live: list[ClaimedIntent]
    lease_seconds: float
    expected_seconds: float
    budgets: Mapping[str, ChannelBudget]


@dataclass
class _Running:
    """A begun batch whose sends are in flight."""

    inflight: InFlight
    lease_seconds: float
    expected_seconds: float
    renew_at: float


def dispatch(run: DispatchRun) -> DispatchReport:
    """One invocation, closed with the deployment's heartbeat and its signals records."""
    config = run.config
    if run.invocation.role == fanout.NUDGE and not idle.work_waiting(
        run.db, config.sms_max_per_hour, config.voice_max_per_hour
    ):
        return DispatchReport()
    if run.tasks is None and run.invocation.role in fanout.DECIDING:
        run = dataclasses.replace(run, tasks=fanout.starter(config.fanout, config.function_timeout_seconds))
    try:
        report = Dispatcher(run).run()
    finally:
        if run.stop.is_set() and run.close_channels is not None:
            run.close_channels()
    heartbeats.complete_dispatch(run.db, config.deployment)
    signal_records.emit(run.db, config.deployment, source="dispatch", config=config.signals, moved=report.moved)
    return report


class Dispatcher:
    """The pipeline of one invocation (`dispatch` closes its run). `estimator`: a warm instance's
    latencies (tests, benches); `clock`: the monotonic clock its deadline and pacing read."""

    def __init__(
        self,
        run: DispatchRun,
        *,
        estimator: LatencyEstimator | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        db, config = run.db, run.config
        self.db = db
        self.config = config
        self.policy = config.retry
        self.channels = run.channels
        self.renderer = Renderer(config.messages, run.keyring)
        self.stop = run.stop
        self.estimator = estimator or LatencyEstimator()
        self.clock = clock
        self.fault = run.fault
        self.owner = new_lease_owner(self.config.deployment)
        self.report = DispatchReport()
        self.abandoned = 0
        self._drained = False  # a claim found nothing eligible
        self._shutdown_begun = False
        self._idle_entered = False  # this invocation registered as the deployment's idle waiter (outbox/idle.py)
        self._beat = heartbeats.ClaimBeat(db, self.config.deployment, clock)
        self.pacer = pacing.from_config(config.pacing, clock)
        self.invocation = run.invocation
        self.budget_seconds = invocation_seconds(config.function_timeout_seconds, config.safety_margin_seconds)
        self.fanout = Fanout(db, config, self.invocation, self.owner, run.tasks, self.pacer, self.budget_seconds, clock)

    # -- the invocation -------------------------------------------------------------------------------
    def run(self) -> DispatchReport:
        o = self.config
        self.deadline = Deadline(self.budget_seconds, self.clock)
        # A fan-out invocation runs only the slot it claims: SlotNotClaimed before anything ran.
        self.fanout.begin()
        workers = sum(o.concurrency(channel) for channel in self.channels)  # threads start as sends need them
        pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="send")
        self.sender = BatchSender(
            self.channels,
            self.renderer,
            pool,
            self.deadline,
            self.estimator,
            self.stop,
            o.send_timeout_seconds,
            self.pacer,
        )
        try:
            self.estimator.seed(heartbeats.start_dispatch(self.db, o.deployment))
            self._loop()
            if self.report.batches:
                heartbeats.save_latency(self.db, o.deployment, self.estimator.snapshot())
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            self._end_fanout()
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
        """The outbox is empty: wait for more (idle_wait.py) if the scheduler started this invocation
        and DISPATCH_IDLE_WAIT is on; a fan-out's or a nudge's ends once the work is done."""
        o = self.config
        if not o.idle_wait or self.invocation.role != SCHEDULED:
            return False
        if not self._idle_entered:
            self._idle_entered = True
            idle_wait.enter(self.db, o, self.owner, self.clock() - self.deadline.started)
        return idle_wait.wait_for_work(self.db, o, self.owner, self.deadline, self.estimator, self.stop, self.clock)

    # -- the steps of a batch ------------------------------------------------------------------------------
    def _claim_next(self, ahead: float) -> _Claimed | None:
        """Claim a batch sized for the time left after `ahead` seconds of work already running;
        suppress its dead intents. None when out of time or out of work (then `_drained`)."""
        o = self.config
        budgets = self._budgets()
        plan = plan_batch(self.deadline.remaining() - ahead, budgets, o.max_batch, o.batch_seconds)
        if plan is None:
            return None
        claimed = self._claim(plan.size, plan.limits, plan.lease_seconds)
        counts = Counter(i.channel for i in claimed)
        full = len(claimed) >= plan.size or any(0 < n <= counts[c] for c, n in plan.limits.items())  # more waits
        self.fanout.consider(len(claimed), claim_full=full, budgets=budgets)
        if not claimed:
            self._drained = True
            return None
        self.report.batches += 1
        self.report.claimed += len(claimed)
        self._record_claim()
        self._fault("after_claim")
        expected = batch_seconds_of(counts, budgets)
        return _Claimed(self._suppress_dead(claimed), plan.lease_seconds, expected, budgets)

    def _budgets(self) -> dict[str, ChannelBudget]:
        """Each channel's cost now: its measured latency (a seeded estimate may predate a cap), its most
        sends in flight, its share of the provider's rate."""
        o = self.config
        return {
            c: budget(min(self.estimator.estimate(c), o.send_timeout_seconds), o.concurrency(c), self.pacer.rate(c))
            for c in self.channels
        }

    def _claim(self, size: int, limits: Mapping[str, int], lease_seconds: float) -> list[ClaimedIntent]:
        """The fused claim: live intents come back begun (their sends not started)."""
        o = self.config
        return transitions.claim(
            self.db,
            self.owner,
            size,
            lease_seconds,
            o.sms_max_per_hour,
            voice_max_per_hour=o.voice_max_per_hour,
            begin=True,
            dead_within=o.send_timeout_seconds,
            limits=limits,
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
        work = [(by_id[b.intent_id], b) for b in begun]
        counts = Counter(intent.channel for intent, _ in work)
        at_once = {c: claimed.budgets[c].inflight(n) for c, n in counts.items() if c in claimed.budgets}
        inflight = self.sender.start(work, at_once)
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
            self._publish_slowdowns()
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
        self._publish_slowdowns()
        return outcomes

    def _publish_slowdowns(self) -> None:
        """A provider's 429 met by a sender: every invocation's claim leaves the channel alone meanwhile."""
        pacing.publish(self.db, self.pacer.unpublished())

    def _end_fanout(self) -> None:
        try:
            self.fanout.end()
        except Exception as exc:  # its slot stops counting at its deadline anyway
            _log.warning("could not free this invocation's fan-out slot: %s", type(exc).__name__)

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
        self.report.tally(outcomes, transitions.settle(self.db, self.owner, settlements, self.config.failures))

    # -- for the operator and the fault tests ---------------------------------------------------------------
    def _record_claim(self) -> None:
        """last_claim_at for this deployment, with the latency estimates so far (throttled)."""
        self._beat.claimed(self.estimator.snapshot())

    def _fault(self, point: str) -> None:
        if self.fault is not None:
            self.fault(point)

    def _log_summary(self) -> None:
        fields = {
            "deployment": self.config.deployment,
            "lease_owner": self.owner,
            "role": self.invocation.role,
            "fanned_out": self.fanout.started,  # invocations this one started
            "abandoned": self.abandoned,
            "send_latency_seconds": self.estimator.snapshot(),
        }
        self.report.log(fields, moved_otherwise=bool(self.abandoned))
