"""Duty: idempotency keys past their retention (IDEMPOTENCY_TTL_SECONDS) are deleted, and so are
accepted request signatures past their tolerance window (signature_replay).

Create already treats an expired key as unused; reaping keeps the table (and its unique index,
which every create probes) the size of one retention window.
"""

from __future__ import annotations

from ...platform.database import load_sql
from .batches import Batch, DutyReport, drain
from .duty import Duty, SweepContext


def sweep(context: SweepContext) -> DutyReport:
    db = context.db

    def batch(limit: int) -> Batch:
        reaped = len(db.run(load_sql(__file__, "reap_idempotency_keys.sql"), limit=limit))
        # Accepted request signatures past their window (api/auth.py): the same kind of expiring key.
        signatures = len(db.run(load_sql(__file__, "reap_signatures.sql"), limit=limit))
        return Batch({"idempotency_keys_reaped": reaped + signatures}, full=max(reaped, signatures) >= limit)

    return drain(DUTY.name, batch, context)


DUTY = Duty("reap_idempotency_keys", sweep, moves=("idempotency_keys_reaped",), recovery=False)
