"""Duty: a claim whose lease expired before any send began becomes eligible again.

The worker stopped between claim and begin-attempt (crash, timeout, SIGTERM without release): no
send started, so this is not an attempt and does not use up the intent's budget. Transition:
outbox.transitions.expire_claims (claimed -> ready|retryable).
"""
from __future__ import annotations

from ...platform.database import Database
from ...outbox import transitions
from ...platform.deadline import Deadline
from .batches import Batch, DutyReport, drain
from .config import ReconcilerConfig

DUTY = "expire_claims"


def sweep(db: Database, config: ReconcilerConfig, budget: Deadline) -> DutyReport:
    def batch(limit: int) -> Batch:
        moved = transitions.expire_claims(db, limit)
        return Batch({"claims_expired": len(moved)}, full=len(moved) >= limit)

    return drain(DUTY, batch, batch_size=config.batch_size, max_batches=config.max_batches, budget=budget)
