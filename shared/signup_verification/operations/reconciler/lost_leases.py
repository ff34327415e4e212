"""Duty: an attempt whose lease expired becomes ambiguous.

The worker began the send and then stopped: the provider may or may not have sent. The intent
becomes `ambiguous`, held for the channel's hold time, with an attempt row (outcome ambiguous,
error_class lease_lost) in the same statement. It counts as an attempt, so an intent that keeps
killing its worker cannot loop forever. Transition: outbox.transitions.lose_leases.
"""
from __future__ import annotations

from ...platform.database import Database
from ...outbox import transitions
from ...platform.deadline import Deadline
from .batches import Batch, DutyReport, drain
from .config import ReconcilerConfig

DUTY = "lose_leases"


def sweep(db: Database, config: ReconcilerConfig, budget: Deadline) -> DutyReport:
    def batch(limit: int) -> Batch:
        moved = transitions.lose_leases(db, config.policy, limit)
        return Batch({"leases_lost": len(moved)}, full=len(moved) >= limit)

    return drain(DUTY, batch, batch_size=config.batch_size, max_batches=config.max_batches, budget=budget)
