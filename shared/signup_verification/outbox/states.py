"""The outbox's vocabulary, defined once: what a delivery intent can be, what an attempt-log row
can say, what the verification it delivers can be, and every statement that moves an intent from
one status to another.

The database enforces the same sets with CHECK constraints (sql/001_schema.sql, sql/014), and
tests/integration/outbox/test_state_machine.py holds them equal. Every statement anywhere that
changes `delivery_intents.status` is listed in TRANSITIONS with the statuses it moves from and to;
the same test fails when a `.sql` file changes a status without being listed here.

`attempting` has two phases that the row tells apart by `sending_at`: *begun* (the attempt row is
written, the send not handed over yet: `sending_at IS NULL`; a release records `released`, not an
attempt) and *sending* (`start.sql` set `sending_at`, before any network call: the send may be on
the wire; only settle or the reconciler's lease-lost sweep end it). start.sql changes no status,
so it is not in the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


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

S = IntentStatus


@dataclass(frozen=True)
class Transition:
    statement: str  # the file, from the repository root (package files under shared/signup_verification/)
    before: frozenset[IntentStatus]  # empty: the statement creates the intent
    after: frozenset[IntentStatus]
    why: str


def _t(statement: str, before: set[IntentStatus], after: set[IntentStatus], why: str) -> Transition:
    return Transition(statement, frozenset(before), frozenset(after), why)


_OUTBOX = "shared/signup_verification/outbox/"
TRANSITIONS: tuple[Transition, ...] = (
    _t("sql/definitions/04_create_verification.sql", set(), {S.READY, S.FAILED},
       "create: ready, or failed at once for a suppressed destination answered silently"),
    _t(_OUTBOX + "claim.sql", {S.READY, S.RETRYABLE}, {S.CLAIMED, S.ATTEMPTING},
       "claim (fenced from here on): a live intent is begun in the same statement"),
    _t(_OUTBOX + "begin_attempts.sql", {S.CLAIMED}, {S.ATTEMPTING}, "begin the attempt of a claimed intent"),
    _t(_OUTBOX + "settle.sql", {S.ATTEMPTING}, {S.ACCEPTED, S.RETRYABLE, S.AMBIGUOUS, S.FAILED},
       "record a send's outcome; a retryable one on the last attempt fails"),
    _t(_OUTBOX + "release.sql", {S.CLAIMED, S.ATTEMPTING}, {S.READY, S.RETRYABLE},
       "the owner gives back work whose send never started (shutdown, budget)"),
    _t(_OUTBOX + "expire_claims.sql", {S.CLAIMED, S.ATTEMPTING}, {S.READY, S.RETRYABLE},
       "the reconciler gives back an expired claim whose send never started"),
    _t(_OUTBOX + "lose_leases.sql", {S.ATTEMPTING}, {S.AMBIGUOUS},
       "the reconciler: a lease expired mid-send, so it may have been sent"),
    _t(_OUTBOX + "resolve_ambiguous.sql", {S.AMBIGUOUS}, {S.RETRYABLE, S.FAILED},
       "the reconciler: an ambiguous hold is over (policy retry or fail)"),
    _t(_OUTBOX + "resolve_lookup.sql", {S.AMBIGUOUS}, {S.ACCEPTED, S.RETRYABLE, S.FAILED},
       "the reconciler asked the provider about an ambiguous SMS"),
    _t("sql/definitions/03_suppress_undelivered_intents.sql", {S.READY, S.RETRYABLE, S.CLAIMED, S.AMBIGUOUS},
       {S.SUPPRESSED}, "its verification ended: nothing left to send (unfenced)"),
    _t("sql/definitions/13_ingest_delivery_reports.sql", {S.ACCEPTED, S.AMBIGUOUS, S.RETRYABLE},
       {S.ACCEPTED, S.FAILED}, "a provider report: delivered (accepted), or final (undeliverable)"),
    _t(_OUTBOX + "replay_events.sql", {S.ACCEPTED, S.FAILED}, {S.READY},
       "`verifyctl webhooks replay`: a finished webhook event is sent again, same webhook-id (guarded, unfenced)"),
    _t("sql/002_create_verification.sql", {S.READY, S.RETRYABLE, S.CLAIMED, S.AMBIGUOUS}, {S.SUPPRESSED},
       "the first version of the suppress transition (a frozen migration; sql/definitions/03 replaces it)"),
)  # fmt: skip


def transitions_of(statement: str) -> Transition:
    return next(t for t in TRANSITIONS if t.statement == statement)
