"""Duty: a claim whose lease expired before any send began becomes eligible again.

The worker stopped between claim and begin-attempt (crash, timeout, SIGTERM without release): no
send started, so this is not an attempt and does not use up the intent's budget. Transition:
outbox.transitions.expire_claims (claimed -> ready|retryable).
"""

from __future__ import annotations

from ...outbox import transitions
from .batches import Batch, DutyReport, drain
from .duty import Duty, SweepContext


def sweep(context: SweepContext) -> DutyReport:
    db = context.db

    def batch(limit: int) -> Batch:
        moved = transitions.expire_claims(db, limit)
        return Batch({"claims_expired": len(moved)}, full=len(moved) >= limit)

    return drain(DUTY.name, batch, context)


DUTY = Duty("expire_claims", sweep, moves=("claims_expired",), recovery=True)
