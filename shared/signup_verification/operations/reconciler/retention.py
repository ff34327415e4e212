"""Duties: evidence retention. Destinations are redacted first, then whole histories are purged.

The windows are policy (legal and security owners set them): RETENTION_REDACT_AFTER_DAYS
(default 30) and RETENTION_PURGE_AFTER_DAYS (default 90). Both run in bounded batches, each batch
one short transaction that sets `signup_verification.retention_purge` locally: the only way past
the attempt log's append-only trigger. Purge runs only when redaction drained in the same run, so
it never has to step over unredacted rows, and it only deletes what was redacted.
"""
from __future__ import annotations

from ...platform.database import Database, load_sql
from ...platform.deadline import Deadline
from .batches import Batch, DutyReport, drain
from .config import ReconcilerConfig

REDACT = "redact_destinations"
PURGE = "purge_history"
_UNLOCK_APPEND_ONLY = "SET LOCAL signup_verification.retention_purge = 'on'"


def _in_retention_transaction(db: Database, sql: str, **params) -> list[list]:
    with db.transaction():
        db.execute_script(_UNLOCK_APPEND_ONLY)
        return db.run(sql, **params)


def redact(db: Database, config: ReconcilerConfig, budget: Deadline) -> DutyReport:
    def batch(limit: int) -> Batch:
        rows = _in_retention_transaction(db, load_sql(__file__, "redact.sql"), limit=limit,
                                         redact_after_seconds=config.redact_after_seconds)
        scrubbed = int(rows[0][1]) if rows else 0
        return Batch({"destinations_redacted": len(rows), "error_texts_scrubbed": scrubbed}, full=len(rows) >= limit)

    return drain(REDACT, batch, batch_size=config.batch_size, max_batches=config.max_batches, budget=budget)


def purge(db: Database, config: ReconcilerConfig, budget: Deadline, *, redaction_drained: bool) -> DutyReport:
    if not redaction_drained:
        report = DutyReport(PURGE, drained=False)
        report.skipped = "redaction has a backlog; purge waits for it"
        return report

    def batch(limit: int) -> Batch:
        rows = _in_retention_transaction(db, load_sql(__file__, "purge.sql"), limit=limit,
                                         purge_after_seconds=config.purge_after_seconds)
        examined = int(rows[0][1]) if rows else 0
        # Rows held back by the superseded_by guard are examined again next batch; a batch that
        # purged nothing ends the duty instead of spinning on them.
        return Batch({"verifications_purged": len(rows)}, full=bool(rows) and examined >= limit)

    return drain(PURGE, batch, batch_size=config.batch_size, max_batches=config.max_batches, budget=budget)
