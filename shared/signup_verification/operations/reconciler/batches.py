"""Bounded batches under a time budget: the loop every reconciler duty shares.

A duty hands `drain` a function that moves at most `limit` rows in one short statement (its own
transaction) and reports what it moved. `drain` repeats it until a batch comes back short (the
backlog is empty), the duty's batch allowance is spent, or the function's time budget runs out.
In the last two cases the report says `drained=False` and the next run continues.

A duty that is nothing more than that, one statement (or two) repeated, is a `Batched` row of
duties.BATCHED: its name, its move, the batch, and whether it is a recovery duty.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .duty import Duty, DutyReport, SweepContext


@dataclass(frozen=True)
class Batch:
    moves: Mapping[str, int]  # move name -> rows moved by this batch
    full: bool  # the batch hit its limit: there may be more


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


# One batch of a Batched duty: the rows each of its statements moved (at most `limit` each).
Moved = Callable[[SweepContext, int], Sequence[int]]


@dataclass(frozen=True)
class Batched:
    """A duty that is its statements repeated in bounded batches: their rows count as one move, and a
    batch is full when any statement hit the limit."""

    name: str
    move: str
    batch: Moved
    recovery: bool = False

    @property
    def duty(self) -> Duty:
        return Duty(self.name, self.sweep, moves=(self.move,), recovery=self.recovery)

    def sweep(self, context: SweepContext) -> DutyReport:
        def batch(limit: int) -> Batch:
            moved = self.batch(context, limit)
            return Batch({self.move: sum(moved)}, full=max(moved, default=0) >= limit)

        return drain(self.name, batch, context)


def statements(*sql: str) -> Moved:
    """A batch that runs each statement (a catalogue section taking `:limit`) and counts its rows."""
    return lambda context, limit: [len(context.db.run(statement, limit=limit)) for statement in sql]
