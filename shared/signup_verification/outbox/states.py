"""The outbox's vocabulary: what a delivery intent can be, what an attempt-log row can say and
what the verification it delivers can be.

The database enforces the same sets with CHECK constraints (sql/schema.sql), and
tests/integration/outbox/test_state_machine.py holds the two equal. The statements that move an
intent from one status to another are the outbox's own (transitions.py says where); `transitions()`
lists them as their `-- transition:` lines declare.

`attempting` has two phases that the row tells apart by `sending_at`: *begun* (the attempt row is
written, the send not handed over yet: `sending_at IS NULL`; a release records `released`, not an
attempt) and *sending* (the `start` statement set `sending_at`, before any network call: the send may
be on the wire; only settle or the reconciler's lease-lost sweep end it). `start` changes no status,
so it declares no transition.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import cache

from ..platform.catalogue import FUNCTIONS, QUERIES, catalogue


class IntentStatus(StrEnum):
    READY = "ready"  # eligible once next_attempt_at <= now(); never attempted, or an event replayed
    CLAIMED = "claimed"  # a worker holds the lease; no attempt begun
    ATTEMPTING = "attempting"  # the attempt row is written: begun, then sending (sending_at set)
    ACCEPTED = "accepted"  # the provider took it: a positive submission result, nothing more
    RETRYABLE = "retryable"  # certainly not sent; eligible again at next_attempt_at
    AMBIGUOUS = "ambiguous"  # it may have been sent; held per channel policy
    FAILED = "failed"  # for good: refused, attempts exhausted, or reported undeliverable
    SUPPRESSED = "suppressed"  # never to be sent: its verification ended (suppression_reason)


class AttemptOutcome(StrEnum):
    """An attempt-log row's outcome. A send ends as one of SEND_OUTCOMES; `attempting` begins each
    attempt and `released` ends one whose send never started. (The reconciler's lease-lost sweep
    writes `ambiguous` with error_class `lease_lost`.)"""

    ATTEMPTING = "attempting"  # the attempt began (written before the network call)
    ACCEPTED = "accepted"
    RETRYABLE = "retryable"
    AMBIGUOUS = "ambiguous"
    FAILED = "failed"
    RELEASED = "released"  # a begun attempt whose send never started was given back: not an attempt


class VerificationStatus(StrEnum):
    """A verification's status (docs/state-model.md, "Verification"): the state machine of verifications/,
    which every intent of the verification follows (an ended one suppresses what is left to send)."""

    PENDING = "pending"  # created: its secrets work until expires_at
    VERIFIED = "verified"  # a secret proved its destination (the first proof); the other may still prove its own
    EXPIRED = "expired"  # expires_at passed (the reconciler marks it; expires_at is the truth meanwhile)
    SUPERSEDED = "superseded"  # a newer verification of the account on its channels replaced it
    LOCKED = "locked"  # too many wrong SMS codes (per verification, or the number's daily budget)


# What a channel adapter's send can end as (delivery/channels/base.py SendResult.outcome).
SEND_OUTCOMES = frozenset({AttemptOutcome.ACCEPTED, AttemptOutcome.RETRYABLE, AttemptOutcome.AMBIGUOUS,
                           AttemptOutcome.FAILED})  # fmt: skip


@dataclass(frozen=True)
class Transition:
    statement: str  # where it is: <file>:<section>, e.g. outbox/queries/claim.sql:claim
    before: frozenset[IntentStatus]  # empty: the statement creates the intent
    after: frozenset[IntentStatus]
    why: str


NEW = "(new)"  # a `-- transition:` that creates the intent: `(new) -> ready`


@cache
def transitions() -> tuple[Transition, ...]:
    """Every statement that changes an intent's status, with the statuses it moves from and to, as
    the sections of the outbox's catalogue and functions declare them (`-- transition: a, b -> c`)."""
    found = []
    for kind in (QUERIES, FUNCTIONS):
        for section in catalogue("outbox", kind).sections.values():
            if "transition" in section.meta:
                before, arrow, after = section.meta["transition"].partition("->")
                if not arrow:
                    raise ValueError(f"{section.file}:{section.line}: a transition reads `before -> after`")
                found.append(
                    Transition(section.where, _statuses(before), _statuses(after), section.meta.get("why", ""))
                )
    return tuple(found)


def _statuses(words: str) -> frozenset[IntentStatus]:
    names = [w.strip() for w in words.split(",") if w.strip() and w.strip() != NEW]
    return frozenset(IntentStatus(n) for n in names)  # an unknown status name is a ValueError
