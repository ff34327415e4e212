"""Duty: evidence retention, second step. Redacted histories past RETENTION_PURGE_AFTER_DAYS
(default 90) are deleted: the verification, its intent and its attempt rows.

It runs only when redaction drained in the same run, so it never has to step over unredacted
rows, and it only deletes what was redacted. Each batch is one retention transaction (redact.py).
"""

from __future__ import annotations

from ...platform.catalogue import catalogue
from .batches import Batch, drain
from .duty import Duty, DutyReport, SweepContext
from .redact import DUTY as REDACT
from .redact import in_retention_transaction

_PURGE = catalogue("operations")["purge"]


def sweep(context: SweepContext) -> DutyReport:
    redaction = context.earlier.get(REDACT.name)
    if redaction is None or not redaction.drained:
        return DutyReport(DUTY.name, drained=False, skipped="redaction has a backlog; purge waits for it")
    db, after = context.db, context.config.purge_after_seconds

    def batch(limit: int) -> Batch:
        rows = in_retention_transaction(db, _PURGE, limit=limit, purge_after_seconds=after)
        examined = int(rows[0][1]) if rows else 0
        # Rows held back by the superseded_by guard are examined again next batch; a batch that
        # purged nothing ends the duty instead of spinning on them.
        return Batch({"verifications_purged": len(rows)}, full=bool(rows) and examined >= limit)

    return drain(DUTY.name, batch, context)


DUTY = Duty("purge_history", sweep, moves=("verifications_purged",))
