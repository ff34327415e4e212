"""Duty: evidence retention, first step. Destinations of finished verifications are redacted.

The windows are policy (legal and security owners set them): RETENTION_REDACT_AFTER_DAYS
(default 30) here, RETENTION_PURGE_AFTER_DAYS (default 90) for purge.py, which only deletes what
this duty redacted. Each batch is one short transaction that sets
`signup_verification.retention_purge` locally (operations/queries/retention.sql:retention_unlock): the only way past the
attempt log's append-only trigger, for the error texts that quoted the address.
"""

from __future__ import annotations

from ...platform.catalogue import catalogue
from ...platform.database import Database
from .batches import Batch, drain
from .duty import Duty, DutyReport, SweepContext

_SQL = catalogue("operations")
_RETENTION_UNLOCK = _SQL["retention_unlock"]
_REDACT = _SQL["redact"]


def in_retention_transaction(db: Database, statement: str, **params) -> list[list]:
    """One retention batch (`statement`, from the operations catalogue): its own transaction, with the
    append-only guard lifted inside it only."""
    with db.transaction():
        db.execute_script(_RETENTION_UNLOCK)
        return db.run(statement, **params)


def sweep(context: SweepContext) -> DutyReport:
    db, after = context.db, context.config.redact_after_seconds

    def batch(limit: int) -> Batch:
        rows = in_retention_transaction(db, _REDACT, limit=limit, redact_after_seconds=after)
        scrubbed = int(rows[0][1]) if rows else 0
        return Batch({"destinations_redacted": len(rows), "error_texts_scrubbed": scrubbed}, full=len(rows) >= limit)

    return drain(DUTY.name, batch, context)


DUTY = Duty("redact_destinations", sweep, moves=("destinations_redacted", "error_texts_scrubbed"))
