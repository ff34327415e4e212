"""Bounded batches under a time budget: the loop every reconciler duty shares.

A duty hands `drain` a function that moves at most `limit` rows in one short statement (its own
transaction) and reports what it moved. `drain` repeats it until a batch comes back short (the
backlog is empty), the duty's batch allowance is spent, or the function's time budget runs out.
In the last two cases the report says `drained=False` and the next run continues.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .duty import SweepContext


@dataclass(frozen=True)
class Batch:
    moves: Mapping[str, int]  # move name -> rows moved by this batch
    full: bool  # the batch hit its limit: there may be more


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


def drain(duty: str, batch: Callable[[int], Batch], context: SweepContext) -> DutyReport:
    """Batches of the context's config.batch_size, at most config.max_batches, within its budget."""
    config, budget = context.config, context.budget
    report = DutyReport(duty)
    while True:
        if report.batches >= config.max_batches or budget.exhausted():
            report.drained = False
            return report
        result = batch(config.batch_size)
        report.batches += 1
        report.moves.update({k: v for k, v in result.moves.items() if v})
        if not result.full:
            return report
