"""Fan-out: more dispatch invocations when one cannot drain the backlog soon enough.

Only an invocation the scheduler or a create's nudge started decides (a fan-out invocation never
starts others, nor waits idle for work). When its claim came back full, at most every CHECK_SECONDS it reads the
eligible backlog per channel and the fan-out invocations live (delivery/queries/fanout.sql:fanout_backlog) and asks for

    invocations = max over channels of ceil(backlog / (one invocation's sends/s x DISPATCH_FANOUT_DRAIN_SECONDS)),
                  each at most ceil(the provider's rate / one invocation's sends/s)

minus itself and those live, within DISPATCH_MAX_PARALLEL live at once. One invocation's sends/s
per channel: its most sends in flight over the measured latency, scaled down to what this
invocation really claimed per second while every claim came back full (an instance short of CPU
sends fewer than its senders could). The connection budget is infra's: each fan-out invocation holds
one connection, and the plan checks DISPATCH_MAX_PARALLEL of them in the sum (infra/locals.tf).
The slots are reserved in the database first (fanout_reserve, under a lock: two scheduled
invocations at the hand-over cannot both take the last), then enqueued through the platform seam
(platform/tasks.py: Cloud Tasks, or the local stand-in). A task's invocation runs only if it claims
its slot, in one statement: reserved for this deployment, still live, never claimed (delivery/queries/fanout.sql:fanout_begin).
A made-up slot, a replayed task (Cloud Tasks delivers at least once) or one whose reservation lapsed
claims nothing, runs nothing (SlotNotClaimed) and frees nothing: the end deletes only its own claim.
Each fan-out invocation claims its own leased batches (SKIP LOCKED; every later write fenced), so
racing invocations never share one.

Every invocation sending at once takes an equal share of each provider rate (pacing.Pacer.share):
1 + the fan-out invocations live, refreshed every SHARE_SECONDS while there are any.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from ..platform.catalogue import catalogue
from ..platform.database import Database
from ..platform.tasks import CloudTasks, LocalTasks, TaskStarter
from .batch_sizing import ChannelBudget
from .capacity_config import FanoutConfig, PacingConfig
from .pacing import Pacer

_SQL = catalogue("delivery")
_FANOUT_BEGIN = _SQL["fanout_begin"]
_FANOUT_END = _SQL["fanout_end"]
_FANOUT_LIVE = _SQL["fanout_live"]
_FANOUT_BACKLOG = _SQL["fanout_backlog"]
_FANOUT_RESERVE = _SQL["fanout_reserve"]

_log = logging.getLogger("signup_verification.delivery.fanout")

CHECK_SECONDS = 5.0  # how often the scheduled invocation looks at the backlog while its claims come back full
MEASURE_SECONDS = 2.0  # a claim rate measured over less than this is not used
SHARE_SECONDS = 5.0  # how often an invocation of a fan-out re-reads how many share the rates
START_ALLOWANCE_SECONDS = 60.0  # a reserved slot counts this long past the budget before its task starts
BACKLOG_CAP = 100_000  # the backlog is counted up to this (beyond it, the answer does not change)

SCHEDULED, FANOUT, NUDGE = "scheduled", "fanout", "nudge"
DECIDING = frozenset({SCHEDULED, NUDGE})  # the invocations that may start fan-out invocations


@dataclass(frozen=True)
class Invocation:
    """Who started this invocation: the scheduler (it may fan out), a create's nudge (outbox/nudge.py:
    it may fan out, never waits idle) or the fan-out (slot = its reservation)."""

    role: str = SCHEDULED
    slot: str | None = None

    @classmethod
    def fanned_out(cls, slot: str) -> Invocation:
        return cls(FANOUT, slot)

    @classmethod
    def nudged(cls) -> Invocation:
        return cls(NUDGE)

    def task_body(self) -> bytes:
        return json.dumps({"fanout": {"slot": self.slot}}).encode()


class SlotNotClaimed(Exception):
    """A fan-out invocation whose slot was not there to claim: it ran nothing. `was`: `claimed` (a
    replay, or a second delivery of its task), `expired` (its reservation lapsed: another may hold
    its place), `unknown` (made up, of another deployment, or already ended)."""

    def __init__(self, slot: str, was: str):
        super().__init__(f"fan-out slot not claimed: {was}")
        self.slot, self.was = slot, was


def invocations_wanted(
    backlog: Mapping[str, int],
    capacity: Mapping[str, float],
    provider_rate: Mapping[str, float | None],
    drain_seconds: float,
) -> int:
    """Invocations (this one included) that drain `backlog` within `drain_seconds`, none past what the
    providers' rates can use. `capacity`: one invocation's sends per second, per channel."""
    wanted = 1
    for channel, count in backlog.items():
        rate = capacity.get(channel, 0.0)
        if count <= 0 or rate <= 0:
            continue
        need = math.ceil(count / (rate * drain_seconds))
        limit = provider_rate.get(channel)
        if limit is not None:
            need = min(need, max(1, math.ceil(limit / rate)))
        wanted = max(wanted, need)
    return wanted


def siblings_to_start(wanted: int, live: int, max_parallel: int) -> int:
    """Fan-out invocations to start: those wanted beyond this one and the live ones, within the bound."""
    return max(0, min(wanted - 1 - live, max_parallel - live))


class FanoutSettings(Protocol):
    """What the fan-out reads of its invocation's settings (operations/config.py's DispatchConfig)."""

    @property
    def deployment(self) -> str: ...
    @property
    def sms_max_per_hour(self) -> int | None: ...
    @property
    def voice_max_per_hour(self) -> int | None: ...
    @property
    def pacing(self) -> PacingConfig: ...
    @property
    def fanout(self) -> FanoutConfig: ...


class Fanout:
    """One invocation's part in the fan-out: the decisions (scheduled), its slot (fan-out), the share."""

    def __init__(
        self,
        db: Database,
        config: FanoutSettings,
        invocation: Invocation,
        owner: str,
        starter: TaskStarter | None,
        pacer: Pacer,
        budget_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.db, self.config, self.invocation, self.owner = db, config, invocation, owner
        self.starter = starter if config.fanout.enabled and invocation.role in DECIDING else None
        self.pacer, self.budget_seconds, self.clock = pacer, budget_seconds, clock
        self.started = 0  # invocations this one started
        self.live = 0  # fan-out invocations live, as last read
        self._checked_at: float | None = None
        self._shared_at = clock()
        self._full_since: tuple[float, int] | None = None  # (when, claimed so far) since claims came back full
        self._claimed = 0
        self._slot_claimed = False

    @property
    def fanned_out(self) -> bool:
        return self.invocation.role == FANOUT

    def begin(self) -> None:
        """A fan-out invocation claims its slot until its own deadline, and takes its share of the
        rates; SlotNotClaimed when the slot is not there to claim (nothing else has run yet)."""
        slot = self.invocation.slot
        if slot is None:
            return
        [[claimed, was, live]] = self.db.run(
            _FANOUT_BEGIN,
            slot=slot,
            deployment=self.config.deployment,
            owner=self.owner,
            until_seconds=self.budget_seconds,
        )
        if not claimed:
            _log.warning(
                "fan-out slot not claimed (%s): this invocation runs nothing",
                was or "unknown",
                extra={"json_fields": {"event": "fanout_slot_refused", "was": was or "unknown"}},
            )
            raise SlotNotClaimed(slot, was or "unknown")
        self._slot_claimed = True
        self._share(live)

    def end(self) -> None:
        """The claimed slot is freed (only this invocation's claim: a refused one frees nothing)."""
        if self._slot_claimed:
            self.db.run(
                _FANOUT_END,
                slot=self.invocation.slot,
                deployment=self.config.deployment,
                owner=self.owner,
            )

    def consider(self, claimed: int, claim_full: bool, budgets: Mapping[str, ChannelBudget]) -> None:
        """After a claim of `claimed` intents: maybe start more invocations (scheduled only, a full
        claim, every CHECK_SECONDS); otherwise, while a fan-out runs, refresh the rate share."""
        now = self.clock()
        if not claim_full:
            self._full_since = None
        elif self._full_since is None:
            self._full_since = (now, self._claimed)
        self._claimed += claimed
        due = self._checked_at is None or now - self._checked_at >= CHECK_SECONDS
        if self.starter is not None and claim_full and due:
            self._checked_at = now
            self._decide(budgets, self._claim_rate(now))
        elif (self.fanned_out or self.live) and now - self._shared_at >= SHARE_SECONDS:
            [[live]] = self.db.run(_FANOUT_LIVE, deployment=self.config.deployment)
            self._share(live)

    def _claim_rate(self, now: float) -> float | None:
        """Intents per second this invocation claimed while every claim came back full (None: too short)."""
        if self._full_since is None or now - self._full_since[0] < MEASURE_SECONDS:
            return None
        since, before = self._full_since
        return (self._claimed - before) / (now - since)

    def _decide(self, budgets: Mapping[str, ChannelBudget], measured: float | None) -> None:
        rows = self.db.rows(
            _FANOUT_BACKLOG,
            cap=BACKLOG_CAP,
            sms_max=self.config.sms_max_per_hour,
            voice_max=self.config.voice_max_per_hour,
            deployment=self.config.deployment,
        )
        backlog = {row["channel"]: row["eligible"] for row in rows}
        live = rows[0]["live"] if rows else 0
        pacing = self.config.pacing
        capacity = {c: b.concurrency / b.per_send for c, b in budgets.items()}  # unshared: one invocation alone
        busy = sum(capacity[c] for c, n in backlog.items() if n and c in capacity)
        if measured is not None and 0 < measured < busy:
            capacity = {c: rate * measured / busy for c, rate in capacity.items()}
        rates = {c: pacing.requests_per_second(c) for c in budgets}
        if pacing.twilio_sender_mps is not None:
            rates["sms"] = min(rates.get("sms") or math.inf, pacing.twilio_sender_mps)
        wanted = invocations_wanted(backlog, capacity, rates, self.config.fanout.drain_seconds)
        count = siblings_to_start(wanted, live, self.config.fanout.max_parallel)
        if count:
            live = self._start(count, backlog, wanted)
        self._share(live)

    def _start(self, count: int, backlog: Mapping[str, int], wanted: int) -> int:
        [[slots, live]] = self.db.run(
            _FANOUT_RESERVE,
            deployment=self.config.deployment,
            owner=self.owner,
            wanted=count,
            max=self.config.fanout.max_parallel,
            until_seconds=self.budget_seconds + START_ALLOWANCE_SECONDS,
        )
        if slots and self.starter is not None:
            self.starter.start([Invocation.fanned_out(slot).task_body() for slot in slots])
            self.started += len(slots)
            _log.info(
                "fan-out: %d more dispatch invocation(s), %d live (backlog %s)",
                len(slots),
                live,
                ", ".join(f"{c} {n}" for c, n in backlog.items() if n),
                extra={
                    "json_fields": {
                        "event": "dispatch_fanout",
                        "started": len(slots),
                        "live": live,
                        "wanted": wanted,
                        "backlog": dict(backlog),
                    }
                },
            )
        return int(live)

    def _share(self, live: int) -> None:
        self.live = int(live)
        self._shared_at = self.clock()
        self.pacer.share(1 + self.live)  # the scheduled invocation and the fan-out's


@lru_cache(maxsize=4)
def starter(config: FanoutConfig, timeout_seconds: float) -> TaskStarter | None:
    """The instance's seam for starting invocations (built once per process): Cloud Tasks with a
    queue, else the local stand-in POSTing to DISPATCH_FANOUT_URL; None when fan-out is off."""
    if not config.enabled or not config.url:
        return None
    if config.queue:
        return CloudTasks(
            config.queue, config.url, config.service_account or "", timeout_seconds + 10, api=config.api_url
        )
    return LocalTasks(config.url, config.max_parallel, timeout_seconds + 10)
