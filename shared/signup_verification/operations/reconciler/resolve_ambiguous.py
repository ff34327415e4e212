"""Duty: an ambiguous intent whose hold has passed is resolved per its channel's policy.

retry -> retryable (attempts left) or failed; fail -> failed; hold -> stays ambiguous for the
operator (the signals count it, and flag intents that were ambiguous twice or more).
Transition: outbox.transitions.resolve_ambiguous.
"""

from __future__ import annotations

from ...outbox import transitions
from .batches import Batch, drain
from .duty import Duty, DutyReport, SweepContext


def sweep(context: SweepContext) -> DutyReport:
    db, policy = context.db, context.config.policy

    def batch(limit: int) -> Batch:
        moved = transitions.resolve_ambiguous(db, policy, limit)
        retryable = sum(1 for _, _, status in moved if status == "retryable")
        return Batch(
            {"ambiguous_to_retryable": retryable, "ambiguous_to_failed": len(moved) - retryable},
            full=len(moved) >= limit,
        )

    return drain(DUTY.name, batch, context)


DUTY = Duty("resolve_ambiguous", sweep, moves=("ambiguous_to_retryable", "ambiguous_to_failed"), recovery=True)
