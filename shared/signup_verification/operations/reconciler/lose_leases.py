"""Duty: an attempt whose lease expired becomes ambiguous.

The worker began the send and then stopped: the provider may or may not have sent. The intent
becomes `ambiguous`, held for the channel's hold time, with an attempt row (outcome ambiguous,
error_class lease_lost) in the same statement. It counts as an attempt, so an intent that keeps
killing its worker cannot loop forever. Transition: outbox.transitions.lose_leases.
"""

from __future__ import annotations

from ...outbox import transitions
from .batches import Batch, DutyReport, drain
from .duty import Duty, SweepContext


def sweep(context: SweepContext) -> DutyReport:
    db, policy = context.db, context.config.policy

    def batch(limit: int) -> Batch:
        moved = transitions.lose_leases(db, policy, limit)
        return Batch({"leases_lost": len(moved)}, full=len(moved) >= limit)

    return drain(DUTY.name, batch, context)


DUTY = Duty("lose_leases", sweep, moves=("leases_lost",), recovery=True)
