"""Duty: intents of dead verifications are suppressed, so no dead link is ever sent.

Pending verifications past expires_at are marked expired; undelivered intents (ready, retryable,
claimed, ambiguous) of expired, superseded, verified or locked verifications become `suppressed`
with that reason. An `attempting` intent is left to settle or lose its lease first.
Transition: outbox.transitions.sweep_dead (the shared suppress function, suppress_undelivered_intents).
"""

from __future__ import annotations

from collections import Counter

from ...outbox import transitions
from .batches import Batch, drain
from .duty import Duty, DutyReport, SweepContext


def sweep(context: SweepContext) -> DutyReport:
    db = context.db

    def batch(limit: int) -> Batch:
        result = transitions.sweep_dead(db, limit)
        moves = Counter(f"suppressed_{reason}" for reason, _ in result.suppressed)
        moves["verifications_expired"] = result.verifications_expired
        full = len(result.suppressed) >= limit or result.verifications_expired >= limit
        return Batch(moves, full=full)

    return drain(DUTY.name, batch, context)


DUTY = Duty(
    "suppress_dead",
    sweep,
    recovery=True,
    moves=(
        "suppressed_expired",
        "suppressed_superseded",
        "suppressed_verified",
        "suppressed_locked",
        "verifications_expired",
    ),
)
