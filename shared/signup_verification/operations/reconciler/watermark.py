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

One run at a time per deployment: a session advisory lock (River's leader-only rescuer). A run that
finds it taken answers `skipped`; the lock goes with the connection if the process dies.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ...platform.database import Database, UnavailableError, load_sql


def heartbeat_name(deployment: str) -> str:
    return f"reconcile:{deployment}"


def try_lock(db: Database, name: str) -> bool:
    return bool(db.run("SELECT pg_try_advisory_lock(hashtextextended(:name, 0))", name=name)[0][0])


def unlock(db: Database, name: str) -> None:
    try:
        db.run("SELECT pg_advisory_unlock(hashtextextended(:name, 0))", name=name)
    except UnavailableError:  # the connection is gone, and the session lock with it
        pass


@dataclass(frozen=True)
class RunStart:
    started_at: datetime
    previous: dict[str, Any]


def begin(db: Database, name: str, deployment: str) -> RunStart:
    row = db.one(load_sql(__file__, "watermark_begin.sql"), name=name, deployment=deployment)
    assert row is not None  # the INSERT ... ON CONFLICT ... RETURNING always returns a row  # nosec B101
    previous = row["previous"]
    if isinstance(previous, str):
        previous = json.loads(previous)
    return RunStart(row["started_at"], previous or {})


def complete(db: Database, name: str, start: RunStart, *, drained: bool, backlog: list[str],
             moves: dict[str, int], cutoffs: dict[str, str]) -> dict[str, Any]:
    covered = start.started_at.isoformat() if drained else start.previous.get("covered_through")
    mark: dict[str, Any] = {"covered_through": covered, "run_started_at": start.started_at.isoformat(),
                            "drained": drained, "backlog": backlog, "moves": moves, **cutoffs}
    [[completed_at]] = db.run(load_sql(__file__, "watermark_complete.sql"), name=name, watermark=json.dumps(mark))
    mark["run_completed_at"] = completed_at.isoformat()
    return mark
