"""Duty: idempotency keys past their retention (IDEMPOTENCY_TTL_SECONDS) are deleted.

Create already treats an expired key as unused; reaping keeps the table (and its unique index,
which every create probes) the size of one retention window.
"""
from __future__ import annotations

from ...platform.database import Database, load_sql
from ...platform.deadline import Deadline
from .batches import Batch, DutyReport, drain
from .config import ReconcilerConfig

DUTY = "reap_idempotency_keys"


def sweep(db: Database, config: ReconcilerConfig, budget: Deadline) -> DutyReport:
    def batch(limit: int) -> Batch:
        reaped = len(db.run(load_sql(__file__, "reap_idempotency_keys.sql"), limit=limit))
        return Batch({"idempotency_keys_reaped": reaped}, full=reaped >= limit)

    return drain(DUTY, batch, batch_size=config.batch_size, max_batches=config.max_batches, budget=budget)
