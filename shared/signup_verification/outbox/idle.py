"""The idle dispatcher's question, asked a few times a second while the outbox is empty: would a
claim find anything? Cheaper than an empty claim (which takes row locks and plans two branches)."""

from __future__ import annotations

from ..platform.database import Database, load_sql


_PROBE = load_sql(__file__, "idle_probe.sql")


def work_waiting(db: Database, sms_max_per_hour: int | None = None) -> bool:
    """True when the claim would take at least one intent now (SMS only within the global budget)."""
    return bool(db.run(_PROBE, sms_max=sms_max_per_hour)[0][0])
