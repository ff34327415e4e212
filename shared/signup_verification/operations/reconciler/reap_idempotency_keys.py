"""Duty: idempotency keys past their retention (IDEMPOTENCY_TTL_SECONDS) are deleted, and so are
accepted request signatures past their tolerance window (signature_replay).

Create already treats an expired key as unused; reaping keeps the table (and its unique index,
which every create probes) the size of one retention window.
"""

from __future__ import annotations

from ...platform.catalogue import catalogue
from .batches import Batch, DutyReport, drain
from .duty import Duty, SweepContext

_PLATFORM = catalogue("platform")
_VERIFICATIONS = catalogue("verifications")
_REAP_IDEMPOTENCY_KEYS = _VERIFICATIONS["reap_idempotency_keys"]
_REAP_SIGNATURES = _PLATFORM["reap_signatures"]


def sweep(context: SweepContext) -> DutyReport:
    db = context.db

    def batch(limit: int) -> Batch:
        reaped = len(db.run(_REAP_IDEMPOTENCY_KEYS, limit=limit))
        # Accepted request signatures past their window (api/replay.py): the same kind of expiring key.
        signatures = len(db.run(_REAP_SIGNATURES, limit=limit))
        return Batch({"idempotency_keys_reaped": reaped + signatures}, full=max(reaped, signatures) >= limit)

    return drain(DUTY.name, batch, context)


DUTY = Duty("reap_idempotency_keys", sweep, moves=("idempotency_keys_reaped",), recovery=False)
