"""The reconciler's watermark and its single-runner guard.

worker_heartbeats row `reconcile:<deployment>`:
  last_started_at, last_completed_at   when the latest run began and finished;
  watermark (jsonb)                    what it covered:
    covered_through   start time of the latest run whose recovery duties (suppress, resolve,
                      expire claims, lose leases) drained: every lease that had expired and every
                      hold that had passed before this instant has been handled. Its age is the
                      `reconciler_watermark_age_seconds` signal; it stops advancing when runs stop,
                      fail, or keep leaving a backlog.
    run_started_at, run_completed_at, drained, backlog (duties left with work), moves, cutoffs.

One run at a time per deployment: a session advisory lock on the row's name (River's leader-only
rescuer; operations/queries/reconciler.sql:run_lock). A run that finds it taken answers `skipped`; the lock goes with the
connection if the process dies. The row's statements live with the other heartbeats
(outbox/heartbeats.py); this module decides what the watermark says.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ...outbox import heartbeats
from ...platform.catalogue import catalogue
from ...platform.database import Database, UnavailableError
from ...platform.timestamps import rfc3339

_SQL = catalogue("operations")
_RUN_LOCK = _SQL["run_lock"]
_RUN_UNLOCK = _SQL["run_unlock"]

heartbeat_name = heartbeats.reconcile_name


def try_lock(db: Database, name: str) -> bool:
    return bool(db.run(_RUN_LOCK, name=name)[0][0])


def unlock(db: Database, name: str) -> None:
    try:
        db.run(_RUN_UNLOCK, name=name)
    except UnavailableError:  # the connection is gone, and the session lock with it
        pass


@dataclass(frozen=True)
class RunStart:
    started_at: datetime
    previous: dict[str, Any]


def begin(db: Database, name: str, deployment: str) -> RunStart:
    row = heartbeats.begin_run(db, name, deployment)
    return RunStart(row["started_at"], row["previous"])


def complete(
    db: Database,
    name: str,
    start: RunStart,
    *,
    drained: bool,
    backlog: list[str],
    moves: dict[str, int],
    cutoffs: dict[str, str],
) -> dict[str, Any]:
    covered = rfc3339(start.started_at) if drained else start.previous.get("covered_through")
    mark: dict[str, Any] = {
        "covered_through": covered,
        "run_started_at": rfc3339(start.started_at),
        "drained": drained,
        "backlog": backlog,
        "moves": moves,
        **cutoffs,
    }
    completed_at = heartbeats.complete_run(db, name, mark)
    mark["run_completed_at"] = rfc3339(completed_at)
    return mark
