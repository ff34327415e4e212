"""Replaying webhook events (`verifyctl webhooks replay`): finished events, accepted or failed, go
back through the outbox with their original webhook-id, so a receiver that was down (or lost what
it stored) gets them again and deduplicates what it already had. outbox/queries/replay.sql:replay_events is the
transition (listed in states.py); the dispatcher sends them at its next run."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from ..platform.catalogue import catalogue
from ..platform.database import Database

_SQL = catalogue("outbox")

_REPLAY = _SQL["replay_events"]
BATCH = 500


@dataclass(frozen=True)
class ReplayedEvent:
    intent_id: int
    verification_id: uuid.UUID
    event_type: str
    event_subject: str | None
    was: str  # accepted | failed


def replay_events(
    db: Database,
    max_attempts: int,
    *,
    since: datetime | None = None,
    verification_id: uuid.UUID | None = None,
    batch: int = BATCH,
) -> list[ReplayedEvent]:
    """Every finished event written since `since` or of `verification_id` (one is required), ready
    again with `max_attempts` attempts to go; one statement (autocommitted) per `batch` events."""
    if since is None and verification_id is None:
        raise ValueError("replay needs a time (since) or a verification id")
    return list(_batches(db, max_attempts, since, verification_id, batch))


def _batches(
    db: Database, max_attempts: int, since: datetime | None, verification_id: uuid.UUID | None, batch: int
) -> Iterator[ReplayedEvent]:
    after = 0
    while True:
        rows = db.rows(
            _REPLAY, since=since, verification_id=verification_id, max_attempts=max_attempts, after=after, limit=batch
        )
        yield from (ReplayedEvent(r["id"], r["verification_id"], r["event_type"], r["event_subject"], r["was"])
                    for r in rows)  # fmt: skip
        if not rows:  # not `len(rows) < batch`: a row locked and changed meanwhile leaves a batch short
            return
        after = max(r["id"] for r in rows)
