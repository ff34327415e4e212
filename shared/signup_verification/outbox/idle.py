"""The idle dispatcher's questions, asked a few times a second while the outbox is empty: would a
claim find anything, and has a newer invocation taken over the waiting? Cheaper than an empty claim
(which takes row locks and plans two branches). The newest waiting invocation wins (outbox/queries/idle.sql:idle_enter),
so invocations may run past the next scheduler tick (their timeout over 60 s) and the older one
leaves as soon as the newer one waits: no minute without a waiter, no long overlap."""

from __future__ import annotations

from dataclasses import dataclass

from ..platform.catalogue import catalogue
from ..platform.database import Database

_SQL = catalogue("outbox")

_PROBE = _SQL["idle_probe"]
_ENTER = _SQL["idle_enter"]


@dataclass(frozen=True)
class Probe:
    waiting: bool  # the claim would take at least one intent now (SMS, WhatsApp and calls within their budgets)
    superseded: bool  # a newer invocation of this deployment is waiting: this one may return


def enter(db: Database, name: str, deployment: str, owner: str, elapsed_seconds: float) -> None:
    """This invocation (started `elapsed_seconds` ago) waits for work now, unless a newer one does."""
    db.run(_ENTER, name=name, deployment=deployment, owner=owner, elapsed=elapsed_seconds)


def probe(
    db: Database, name: str, owner: str, sms_max_per_hour: int | None = None, voice_max_per_hour: int | None = None
) -> Probe:
    waiting, superseded = db.run(
        _PROBE, sms_max=sms_max_per_hour, voice_max=voice_max_per_hour, name=name, owner=owner
    )[0]
    return Probe(bool(waiting), bool(superseded))


def work_waiting(db: Database, sms_max_per_hour: int | None = None, voice_max_per_hour: int | None = None) -> bool:
    return probe(db, "", "", sms_max_per_hour, voice_max_per_hour).waiting
