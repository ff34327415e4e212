"""worker_heartbeats: the liveness rows of the outbox's workers, and the latency estimates they carry.

    dispatch:<deployment>    last_claim_at (the absence alert reads it), at most one write per
                             HEARTBEAT_SECONDS; watermark.send_latency_seconds, the per-channel send
                             latency that seeds the next invocation's batch sizing (a cold instance
                             starts informed); last_completed_at at the end of every invocation
                             (complete_dispatch: the status table's last completed run).
    reconcile:<deployment>   last_started_at, last_completed_at and the reconciler's watermark
                             (operations/reconciler/watermark.py decides what it says and holds the
                             lock that lets one run at a time write it).
The signals read both rows (operations/queries/signals.sql:signals, and `rows` here for the status table). Every
statement is a `heartbeat_*` section of outbox/queries/heartbeats.sql.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..platform.catalogue import catalogue
from ..platform.database import Database

_SQL = catalogue("outbox")
_HEARTBEAT_START_DISPATCH = _SQL["heartbeat_start_dispatch"]
_HEARTBEAT_SAVE_LATENCY = _SQL["heartbeat_save_latency"]
_HEARTBEAT_COMPLETE_DISPATCH = _SQL["heartbeat_complete_dispatch"]
_HEARTBEAT_RECORD_CLAIM = _SQL["heartbeat_record_claim"]
_HEARTBEAT_BEGIN_RUN = _SQL["heartbeat_begin_run"]
_HEARTBEAT_COMPLETE_RUN = _SQL["heartbeat_complete_run"]
_HEARTBEAT_ROWS = _SQL["heartbeat_rows"]

# last_claim_at feeds an absence alert measured in minutes: one write per few seconds is enough (a
# write per batch would be a commit per batch: bench/throughput_bench.py).
HEARTBEAT_SECONDS = 5.0


def dispatch_name(deployment: str) -> str:
    return f"dispatch:{deployment}"


def reconcile_name(deployment: str) -> str:
    return f"reconcile:{deployment}"


# -- the dispatcher's row ---------------------------------------------------------------------------------
def start_dispatch(db: Database, deployment: str) -> dict[str, float]:
    """Custom plans for this session (see outbox/queries/heartbeats.sql:heartbeat_start_dispatch), and the latency figures the
    last invocation saved ({} when there are none), in one round trip."""
    latency = db.run(_HEARTBEAT_START_DISPATCH, name=dispatch_name(deployment))[0][1]
    return latency if isinstance(latency, dict) else {}


def save_latency(db: Database, deployment: str, latency: Mapping[str, float]) -> None:
    """What this invocation measured, for the next one."""
    db.run(
        _HEARTBEAT_SAVE_LATENCY,
        name=dispatch_name(deployment),
        latency=json.dumps(dict(latency)),
    )


def complete_dispatch(db: Database, deployment: str) -> None:
    """The invocation ended (idle or not): the status table's "last completed" for dispatch."""
    db.run(_HEARTBEAT_COMPLETE_DISPATCH, name=dispatch_name(deployment), deployment=deployment)


class ClaimBeat:
    """last_claim_at of one invocation, with the latency figures so far: written on the first claim,
    then at most once per HEARTBEAT_SECONDS."""

    def __init__(self, db: Database, deployment: str, clock: Callable[[], float] = time.monotonic):
        self.db, self.deployment, self.clock = db, deployment, clock
        self._at: float | None = None

    def claimed(self, latency: Mapping[str, float]) -> None:
        now = self.clock()
        if self._at is not None and now - self._at < HEARTBEAT_SECONDS:
            return
        self._at = now
        self.db.run(
            _HEARTBEAT_RECORD_CLAIM,
            name=dispatch_name(self.deployment),
            deployment=self.deployment,
            latency=json.dumps(dict(latency)),
        )


# -- the reconciler's row ---------------------------------------------------------------------------------
def begin_run(db: Database, name: str, deployment: str) -> dict[str, Any]:
    """{started_at, previous}: the run's start as the database sees it, and the watermark before it."""
    row = db.one(_HEARTBEAT_BEGIN_RUN, name=name, deployment=deployment)
    assert row is not None  # the INSERT ... ON CONFLICT ... RETURNING always returns a row  # nosec B101
    previous = row["previous"]
    if isinstance(previous, str):
        previous = json.loads(previous)
    return {"started_at": row["started_at"], "previous": previous or {}}


def complete_run(db: Database, name: str, watermark: Mapping[str, Any]) -> Any:
    """Records the run's watermark; returns last_completed_at."""
    [[completed_at]] = db.run(_HEARTBEAT_COMPLETE_RUN, name=name, watermark=json.dumps(dict(watermark)))
    return completed_at


# -- every row, for the operator --------------------------------------------------------------------------
def rows(db: Database) -> list[dict[str, Any]]:
    """Every heartbeat row (dispatch and reconcile of every deployment sharing this database), with ages."""
    return db.rows(_HEARTBEAT_ROWS)
