"""One reconcile run: every duty of duties.DUTIES in its order, bounded, under the function's time budget.

The reconciler is a safety path, not a second sender: it only moves rows through the outbox's
transitions (outbox/transitions.py) and housekeeping statements. Each duty has one
`sweep(context)` (duty.py); the order, and why it matters, is in duties.py. Then the watermark (which
advances only when every recovery duty drained), one structured record for the run, and the
signal records.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ...platform.database import Database
from ...platform.deadline import Deadline
from ...platform.timestamps import rfc3339
from .. import signal_records
from ..config import ReconcilerConfig, SignalsConfig
from . import watermark
from .count_overdue import DUTY as COUNT_OVERDUE
from .count_overdue import Overdue
from .duties import DUTIES
from .duty import DutyReport, SweepContext

_log = logging.getLogger("signup_verification.operations.reconciler")

RECOVERY = tuple(d.name for d in DUTIES if d.recovery)
MOVERS = tuple(d.name for d in DUTIES if d.moves)  # the duties of the answer's `duties` block
# Every move name a run reports (0 when nothing moved), and `suppressed`: the sum of suppressed_*.
MOVES = tuple(m for d in DUTIES for m in d.moves) + ("suppressed",)


@dataclass
class ReconcileReport:
    deployment: str
    duties: list[DutyReport] = field(default_factory=list)
    watermark: dict[str, Any] = field(default_factory=dict)
    elapsed_ms: int = 0
    skipped: str | None = None

    @property
    def moves(self) -> dict[str, int]:
        total: Counter = Counter({name: 0 for name in MOVES})
        for duty in self.duties:
            total.update(duty.moves)
        total["suppressed"] = sum(v for k, v in total.items() if k.startswith("suppressed_"))
        return dict(total)

    @property
    def overdue(self) -> list[Overdue]:
        return next((d.found for d in self.duties if d.duty == COUNT_OVERDUE.name), [])

    @property
    def drained(self) -> bool:
        return all(d.drained for d in self.duties)

    @property
    def moved(self) -> int:
        """Rows moved through a transition (the suppressions' total and scrubbed texts aside)."""
        return sum(v for k, v in self.moves.items() if not k.startswith("suppressed_") and k != "error_texts_scrubbed")

    @property
    def busy(self) -> bool:
        """Anything to tell: something moved or was scrubbed, work is overdue, a backlog is left."""
        return bool(any(self.moves.values()) or sum(o.count for o in self.overdue) or not self.drained)

    def summary(self) -> str:
        """The report for a person (`verifyctl reconcile`; its --json is as_json())."""
        if self.skipped:
            return f"reconcile skipped: {self.skipped}"
        if not self.busy:
            return f"reconcile: nothing to do ({self.elapsed_ms} ms)"
        moved = ", ".join(f"{name} {n}" for name, n in self.moves.items() if n and name != "suppressed")
        line = f"reconcile: {self.moved} row(s) moved in {self.elapsed_ms} ms" + (f": {moved}" if moved else "")
        for o in self.overdue:
            line += f"; {o.channel}: {o.count} overdue (oldest {o.oldest_seconds:.0f} s)"
        if not self.drained:
            line += f"; left for the next run: {', '.join(self.watermark.get('backlog') or [])}"
        return line

    def as_json(self) -> dict[str, Any]:
        if self.skipped:
            return {"skipped": self.skipped, "deployment": self.deployment}
        return {
            "deployment": self.deployment,
            "moves": self.moves,
            "overdue": {o.channel: {"count": o.count, "oldest_seconds": o.oldest_seconds} for o in self.overdue},
            "drained": self.drained,
            "duties": {d.duty: d.as_json() for d in self.duties if d.duty in MOVERS},
            "watermark": self.watermark,
            "elapsed_ms": self.elapsed_ms,
        }


def reconcile(
    db: Database,
    config: ReconcilerConfig,
    *,
    signals_config: SignalsConfig | None = None,
    emit_signals: bool = True,
) -> ReconcileReport:
    started = time.monotonic()
    budget = Deadline.within(config.function_timeout_seconds, config.safety_margin_seconds)
    report = ReconcileReport(config.deployment)
    name = watermark.heartbeat_name(config.deployment)
    if not watermark.try_lock(db, name):
        report.skipped = "another reconcile run of this deployment is in progress"
        _log.info(
            "reconcile skipped: %s",
            report.skipped,
            extra={"json_fields": {"event": "reconcile", "deployment": config.deployment, "skipped": True}},
        )
        return report
    try:
        start = watermark.begin(db, name, config.deployment)
        context = SweepContext(db, config, budget, config.deployment)
        for duty in DUTIES:
            context.earlier[duty.name] = result = duty.sweep(context)
            report.duties.append(result)
        report.watermark = watermark.complete(
            db,
            name,
            start,
            drained=all(d.drained for d in report.duties if d.duty in RECOVERY),
            backlog=[d.duty for d in report.duties if not d.drained],
            moves=report.moves,
            cutoffs=_cutoffs(start.started_at, config),
        )
    finally:
        watermark.unlock(db, name)
    report.elapsed_ms = int((time.monotonic() - started) * 1000)
    _log_run(report)
    if emit_signals:
        signal_records.emit(db, config.deployment, source="reconcile", config=signals_config, moved=report.busy)
    return report


def _cutoffs(started_at: datetime, config: ReconcilerConfig) -> dict[str, str]:
    at = started_at.astimezone(UTC)
    return {
        "overdue_before": rfc3339(at - timedelta(seconds=config.polling_horizon_seconds)),
        "redacted_before": rfc3339(at - timedelta(seconds=config.redact_after_seconds)),
        "purged_before": rfc3339(at - timedelta(seconds=config.purge_after_seconds)),
    }


def _log_run(report: ReconcileReport) -> None:
    moves = report.moves
    fields: dict[str, Any] = {
        "event": "reconcile",
        "deployment": report.deployment,
        **moves,
        "overdue_count": sum(o.count for o in report.overdue),
        "drained": report.drained,
        "backlog": report.watermark.get("backlog", []),
        "watermark_covered_through": report.watermark.get("covered_through"),
        "elapsed_ms": report.elapsed_ms,
    }
    _log.log(
        logging.INFO if report.busy else logging.DEBUG,  # an idle run is quiet
        "reconcile: %d row(s) moved in %d ms%s",
        report.moved,
        report.elapsed_ms,
        "" if report.drained else " (backlog left for the next run)",
        extra={"json_fields": fields},
    )
