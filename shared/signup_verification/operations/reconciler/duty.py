"""The one shape every reconciler duty has (River's maintenance services: one job each, uniform).

A duty is a name, a `sweep(context) -> DutyReport`, the move names it may report, and whether it
is a recovery duty (the watermark advances only when every recovery duty drained). A duty that is
one bounded statement repeated is a row of duties.BATCHED (batches.py runs it); the others are a
module each that declares its `DUTY`. duties.py lists them all in the order a run sweeps them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from ...platform.database import Database
from ...platform.deadline import Deadline
from ..config import ReconcilerConfig


@dataclass
class DutyReport:
    duty: str
    moves: Counter = field(default_factory=Counter)
    batches: int = 0
    drained: bool = True
    skipped: str | None = None  # why the duty did not run at all
    found: list = field(default_factory=list)  # what a duty that moves nothing found (count_overdue)

    def as_json(self) -> dict:
        body = {"batches": self.batches, "drained": self.drained, "moves": dict(self.moves)}
        if self.skipped:
            body["skipped"] = self.skipped
        return body


@dataclass(frozen=True)
class SweepContext:
    """What a sweep may use: the connection, the run's explicit config and time budget, and the
    reports of the duties that already ran in this run (purge waits for redaction)."""

    db: Database
    config: ReconcilerConfig
    budget: Deadline
    deployment: str
    earlier: dict[str, DutyReport] = field(default_factory=dict)


@dataclass(frozen=True)
class Duty:
    name: str
    sweep: Callable[[SweepContext], DutyReport]
    moves: tuple[str, ...]  # what it may move; a duty that moves nothing only reports what it found
    recovery: bool = False
