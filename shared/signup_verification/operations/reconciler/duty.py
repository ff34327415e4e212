"""The one shape every reconciler duty has (River's maintenance services: one job each, uniform).

A duty is a name, a `sweep(context) -> DutyReport`, the move names it may report, and whether it
is a recovery duty (the watermark advances only when every recovery duty drained). Each duty
module declares its `DUTY`; duties.py lists them in the order a run sweeps them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ...platform.database import Database
from ...platform.deadline import Deadline
from ..config import ReconcilerConfig
from .batches import DutyReport


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
