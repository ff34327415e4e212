"""Duty: an ambiguous intent whose hold has passed is resolved per its channel's policy.

retry -> retryable (attempts left) or failed; fail -> failed; hold -> stays ambiguous for the
operator (the signals count it, and flag intents that were ambiguous twice or more).
Transition: outbox.transitions.resolve_ambiguous.
"""
from __future__ import annotations

from ...platform.database import Database
from ...outbox import transitions
from ...platform.deadline import Deadline
from .batches import Batch, DutyReport, drain
from .config import ReconcilerConfig

DUTY = "resolve_ambiguous"


def sweep(db: Database, config: ReconcilerConfig, budget: Deadline) -> DutyReport:
    def batch(limit: int) -> Batch:
        moved = transitions.resolve_ambiguous(db, config.policy, limit)
        retryable = sum(1 for _, _, status in moved if status == "retryable")
        return Batch({"ambiguous_to_retryable": retryable, "ambiguous_to_failed": len(moved) - retryable},
                     full=len(moved) >= limit)

    return drain(DUTY, batch, batch_size=config.batch_size, max_batches=config.max_batches, budget=budget)
