"""Duty: eligible work older than the normal polling horizon is counted and logged.

It moves nothing: the dispatcher is the only sender. Overdue eligible intents mean the worker is
not keeping up or not running; the reconciler reports them (a WARNING record per channel, and the
`overdue` block of its answer) so the page has a second, independent witness.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ...platform.catalogue import catalogue
from .duty import Duty, DutyReport, SweepContext

_SQL = catalogue("operations")
_OVERDUE = _SQL["overdue"]

_log = logging.getLogger("signup_verification.operations.reconciler")


@dataclass(frozen=True)
class Overdue:
    channel: str
    count: int
    oldest_seconds: float


def sweep(context: SweepContext) -> DutyReport:
    horizon = context.config.polling_horizon_seconds
    rows = context.db.run(_OVERDUE, horizon_seconds=horizon)
    found = [Overdue(channel, count, round(oldest, 3)) for channel, count, oldest in rows]
    for item in found:
        _log.warning(
            "%d eligible %s intent(s) waited longer than the %g s polling horizon (oldest %.0f s): "
            "the dispatcher is not keeping up or not running",
            item.count,
            item.channel,
            horizon,
            item.oldest_seconds,
            extra={
                "labels": {"channel": item.channel},
                "json_fields": {
                    "event": "overdue_eligible",
                    "deployment": context.deployment,
                    "channel": item.channel,
                    "overdue_count": item.count,
                    "oldest_overdue_seconds": item.oldest_seconds,
                    "polling_horizon_seconds": horizon,
                },
            },
        )
    return DutyReport(DUTY.name, found=found)


DUTY = Duty("count_overdue", sweep, moves=())
