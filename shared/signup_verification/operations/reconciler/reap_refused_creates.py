"""Duty: refused creates past every limit window are deleted.

A create refused with an answer about someone else (the suppression list's 422, another
destination's 429) leaves a `refused` create_events row that counts against the caller's account
and client limits for their one-hour window (sql/definitions/15 count_refused_create). Nothing else
reads those rows, so once they are past the window they go, in bounded batches on their own index.
"""

from __future__ import annotations

from ...platform.catalogue import catalogue
from .batches import Batch, DutyReport, drain
from .duty import Duty, SweepContext

_SQL = catalogue("verifications")
_REAP_REFUSED_CREATES = _SQL["reap_refused_creates"]


def sweep(context: SweepContext) -> DutyReport:
    def batch(limit: int) -> Batch:
        reaped = len(context.db.run(_REAP_REFUSED_CREATES, limit=limit))
        return Batch({"refused_creates_reaped": reaped}, full=reaped >= limit)

    return drain(DUTY.name, batch, context)


DUTY = Duty("reap_refused_creates", sweep, moves=("refused_creates_reaped",), recovery=False)
