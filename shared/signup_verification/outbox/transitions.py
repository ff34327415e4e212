"""The outbox state machine: the one place each transition of a delivery intent is defined, and run.

Every statement that changes `delivery_intents.status` is a section of the outbox's catalogue
(outbox/queries/*.sql, run by the functions below) or one of its functions (outbox/functions/*.sql, which
other SQL calls: create's enqueue_steps, the reports' observe_deliveries, record_event, the
suppression), and declares the statuses it moves from and to in a `-- transition:` line
(states.transitions(); docs/state-model.md shows them; tests/integration/outbox/test_state_machine.py
holds that nothing else writes a status).

    ready/retryable --claim--> claimed --begin--> attempting --settle--> accepted|retryable|ambiguous|failed
    ready/retryable --claim(begin)--> attempting --start--> (sending) --settle--> ...   (the fused claim)
    claimed, or attempting not yet started --release (owner, or reconciler on expiry)--> ready/retryable
                                                            (not an attempt; a begun one logs 'released')
    attempting, sending --lease lost (reconciler)--> ambiguous                 (an attempt row records it)
                                                   or failed when reported final meanwhile
    ambiguous --resolve (reconciler, hold passed)--> retryable|failed
    ambiguous --lookup (reconciler asked the provider)--> accepted|retryable|failed
    ambiguous|retryable --delivered report (observe_deliveries)--> accepted
    accepted, ambiguous|retryable --permanent report of the current attempt--> failed (undeliverable_reason)
    ready|retryable|claimed|ambiguous --suppress--> suppressed                  (suppress_undelivered_intents, dead verification)
    attempting not yet started --suppress--> suppressed, a 'released' row     (a proof while a batch waits to start)

Every write after the claim is fenced: it matches id AND lease_owner AND lease_version AND a lease
still current (`lease_until > now()`). A write from a worker that lost its lease changes nothing
and is reported back so the caller can count it as stale. Each section is one statement, so the
state change and the attempt-log row that explains it commit together. All calls are batched:
statements per batch stay constant whatever the batch size.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..platform.catalogue import catalogue
from ..platform.channels import DELIVERY_CHANNELS
from ..platform.database import Database
from .config import FailurePolicy, RetryPolicy
from .states import SEND_OUTCOMES, AttemptOutcome, VerificationStatus

# settle: a send the provider took whose final report, stored first, failed the intent (status `failed`)
UNDELIVERABLE = "undeliverable"

_SQL = catalogue("outbox")
_CLAIM = _SQL["claim"]
_BEGIN_ATTEMPTS = _SQL["begin_attempts"]
_START = _SQL["start"]
_SETTLE = _SQL["settle"]
_RELEASE = _SQL["release"]
_RENEW = _SQL["renew"]
_SUPPRESS = _SQL["suppress"]
_EXPIRE_CLAIMS = _SQL["expire_claims"]
_LOSE_LEASES = _SQL["lose_leases"]
_RESOLVE_AMBIGUOUS = _SQL["resolve_ambiguous"]
_RESOLVE_LOOKUP = _SQL["resolve_lookup"]
_SUPPRESS_DEAD = _SQL["suppress_dead"]


@dataclass(frozen=True)
class ClaimedIntent:
    id: int
    verification_id: uuid.UUID
    channel: str
    locale: str
    template_version: str
    attempts: int
    ambiguous_count: int
    lease_version: int
    lease_until: datetime
    created_at: datetime
    destination: str | None
    key_id: str
    token_nonce: bytes
    expires_at: datetime
    verification_status: str
    # 'primary' | 'fallback' | 'event'; an event (channel 'webhook') carries its type and data
    role: str = "primary"
    event_type: str | None = None
    event_subject: str | None = None  # the delivery (its channel) a per-delivery event reports
    payload: Any = None
    begun: bool = False  # the fused claim began its attempt (status attempting, sends not started yet)
    route_held_until: datetime | None = None  # its route is held until then (the claim says): not to be sent

    def __repr__(self) -> str:  # no destination or nonce in reprs that may reach a log
        return f"ClaimedIntent(id={self.id}, channel={self.channel!r}, lease_version={self.lease_version})"

    @property
    def is_event(self) -> bool:
        return self.role == "event"

    @property
    def fence(self) -> tuple[int, int]:
        return self.id, self.lease_version

    @property
    def attempt(self) -> BegunAttempt:
        """The attempt the fused claim began (only when `begun`)."""
        return BegunAttempt(self.id, f"{self.id}:{self.attempts}", self.attempts)

    def route_held_for(self) -> float | None:
        """Seconds until its route's hold ends, or None when its route is not held."""
        if self.route_held_until is None:
            return None
        left = (self.route_held_until - datetime.now(UTC)).total_seconds()
        return left if left > 0 else None

    def dead_reason(self, now: datetime) -> str | None:
        """Why this intent must not be sent (its link would be dead), or None. A webhook event carries
        no link: it reports the verification's end, so it is never dead."""
        if self.is_event:
            return None
        if self.verification_status != VerificationStatus.PENDING:
            return self.verification_status  # superseded | verified | expired | locked
        if self.expires_at <= now:
            return "expired"
        if self.destination is None:
            return "redacted"
        return None


@dataclass(frozen=True)
class BegunAttempt:
    intent_id: int
    attempt_id: str
    attempt_number: int


@dataclass(frozen=True)
class Settlement:
    intent_id: int
    lease_version: int
    outcome: AttemptOutcome  # one of SEND_OUTCOMES
    delay_seconds: float = 0.0  # before the next attempt (retryable) or the hold (ambiguous)
    error_class: str | None = None
    error_detail: str | None = None
    provider_ref: str | None = None
    segments: int | None = None
    attempted: bool = True  # False: never handed to the provider (retryable only); not charged as an attempt
    # a failed outcome's verdict (delivery/classification/): the reason recorded, and what it sets off
    category: str | None = None
    code: str | None = None
    provider: str | None = None
    fault: str | None = None
    scope: str | None = None  # account | route | message: what the failure may hold (classification/)

    def __post_init__(self) -> None:
        if self.outcome not in SEND_OUTCOMES:
            raise ValueError(f"unknown outcome {self.outcome!r}")
        if not self.attempted and self.outcome is not AttemptOutcome.RETRYABLE:
            raise ValueError("only a retryable outcome can be not attempted")


def _fences(fences: Iterable[tuple[int, int]]) -> tuple[str, str]:
    ids, versions = [], []
    for intent_id, version in fences:
        ids.append(intent_id)
        versions.append(version)
    return _array(ids), _array(versions)


# Array parameters written as PostgreSQL array literals here, in one join per array: pg8000 writes
# the same text element by element through singledispatch (~2 us each, nine arrays per settled
# intent). The statements' casts (`:ids::bigint[]`) read them exactly as before.
def _array(values: Iterable[int | float | bool | None]) -> str:
    """bigint[] / float8[] / integer[] / boolean[] literal (str() of a float round-trips)."""
    return (
        "{"
        + ",".join(
            "NULL" if v is None else ("true" if v else "false") if v is True or v is False else str(v) for v in values
        )
        + "}"
    )


def _text_array(values: Iterable[str | None]) -> str:
    """text[] literal: each element double-quoted, backslash and double quote escaped."""
    return (
        "{"
        + ",".join("NULL" if v is None else '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values)
        + "}"
    )


# -- worker transitions (fenced) ------------------------------------------------------------------
def claim(
    db: Database,
    owner: str,
    limit: int,
    lease_seconds: float,
    sms_max_per_hour: int | None = None,
    *,
    voice_max_per_hour: int | None = None,
    begin: bool = False,
    dead_within: float = 0.0,
    limits: Mapping[str, int] | None = None,
) -> list[ClaimedIntent]:
    """`sms_max_per_hour`: the global SMS budget (None: none), which WhatsApp counts in too;
    `voice_max_per_hour`: the call budget. Past a budget its channels' intents are left eligible.
    `begin`: the fused claim: intents whose link lives `dead_within` seconds more are begun too
    (`begun`; their sends are handed over later with `start`, or they are `release`d).
    `limits`: at most this many of each channel (a channel not named: up to `limit`)."""
    if limit <= 0:
        return []
    per_channel = {c: min(limit, (limits or {}).get(c, limit)) for c in DELIVERY_CHANNELS}
    rows = db.rows(
        _CLAIM,
        owner=owner,
        limit=limit,
        **{f"{channel}_limit": n for channel, n in per_channel.items()},
        lease_seconds=lease_seconds,
        sms_max=sms_max_per_hour,
        voice_max=voice_max_per_hour,
        begin=begin,
        dead_within=float(dead_within),
    )
    return [ClaimedIntent(**row) for row in rows]


def begin_attempts(db: Database, owner: str, fences: Sequence[tuple[int, int]]) -> list[BegunAttempt]:
    if not fences:
        return []
    ids, versions = _fences(fences)
    rows = db.run(_BEGIN_ATTEMPTS, owner=owner, ids=ids, versions=versions)
    return [BegunAttempt(*row) for row in rows]


def start(db: Database, owner: str, fences: Sequence[tuple[int, int]]) -> list[BegunAttempt]:
    """Attempts begun by the fused claim: their sends start now (fenced). The ones returned may be sent."""
    if not fences:
        return []
    ids, versions = _fences(fences)
    rows = db.run(_START, owner=owner, ids=ids, versions=versions)
    return [BegunAttempt(*row) for row in rows]


def settle(
    db: Database, owner: str, settlements: Sequence[Settlement], failures: FailurePolicy | None = None
) -> dict[int, str]:
    """Record outcomes; returns intent id -> the status the settle statement left (a retryable outcome on the
    last attempt is `failed` there) for each settlement that applied (the rest were stale); `undeliverable`
    for one a final provider report stored before the settle failed (the provider took the send).
    `failures`: what a failure for good sets off (suppression, channel and route holds)."""
    if not settlements:
        return {}
    rows = db.run(
        _SETTLE,
        owner=owner,
        ids=_array([s.intent_id for s in settlements]),
        versions=_array([s.lease_version for s in settlements]),
        outcomes=_text_array([s.outcome for s in settlements]),
        delays=_array([float(s.delay_seconds) for s in settlements]),
        error_classes=_text_array([s.error_class for s in settlements]),
        error_details=_text_array([(s.error_detail or None) and s.error_detail[:500] for s in settlements]),
        provider_refs=_text_array([s.provider_ref for s in settlements]),
        segments=_array([s.segments for s in settlements]),
        attempted=_array([s.attempted for s in settlements]),
        categories=_text_array([s.category for s in settlements]),
        codes=_text_array([s.code for s in settlements]),
        providers=_text_array([s.provider for s in settlements]),
        faults=_text_array([s.fault for s in settlements]),
        scopes=_text_array([s.scope for s in settlements]),
        **(failures or FailurePolicy()).parameters(),
    )
    return {row[0]: UNDELIVERABLE if row[2] else row[1] for row in rows}


def release(db: Database, owner: str, fences: Sequence[tuple[int, int]]) -> set[int]:
    if not fences:
        return set()
    ids, versions = _fences(fences)
    return {row[0] for row in db.run(_RELEASE, owner=owner, ids=ids, versions=versions)}


def renew(db: Database, owner: str, fences: Sequence[tuple[int, int]], lease_seconds: float) -> dict[int, datetime]:
    if not fences:
        return {}
    ids, versions = _fences(fences)
    rows = db.run(_RENEW, owner=owner, ids=ids, versions=versions, lease_seconds=lease_seconds)
    return {row[0]: row[1] for row in rows}


def suppress(db: Database, verification_ids: Sequence[uuid.UUID], reason: str) -> set[int]:
    """Dead verification -> its undelivered intent suppressed (suppress_undelivered_intents, shared with create)."""
    if not verification_ids:
        return set()
    rows = db.run(_SUPPRESS, ids=list(verification_ids), reason=reason)
    return {row[0] for row in rows}


# -- reconciler transitions (guarded by expiry, never send) ----------------------------------------
def expire_claims(db: Database, limit: int) -> list[tuple[int, str]]:
    return [(r[0], r[1]) for r in db.run(_EXPIRE_CLAIMS, limit=limit)]


def lose_leases(db: Database, policy: RetryPolicy, limit: int) -> list[tuple[int, str]]:
    channels = list(policy.channels)
    rows = db.run(
        _LOSE_LEASES,
        limit=limit,
        channels=channels,
        holds=[policy.ambiguous_delay(c) for c in channels],
    )
    return [(r[0], r[1]) for r in rows]


def resolve_ambiguous(db: Database, policy: RetryPolicy, limit: int) -> list[tuple[int, str, str]]:
    acting = [c for c, p in policy.channels.items() if p.ambiguity != "hold"]
    if not acting:
        return []
    rows = db.run(
        _RESOLVE_AMBIGUOUS,
        limit=limit,
        channels=acting,
        policies=[policy.channel(c).ambiguity for c in acting],
    )
    return [(r[0], r[1], r[2]) for r in rows]


def resolve_by_lookup(db: Database, found: Sequence[tuple[int, str, str | None]]) -> dict[int, str]:
    """Ambiguous sends the provider was asked about (an SMS, a WhatsApp message, a call): (intent id,
    attempt id, sid or None for absent) -> accepted | retryable | failed; returns intent id -> new status
    for the rows that moved."""
    if not found:
        return {}
    rows = db.run(
        _RESOLVE_LOOKUP,
        ids=[f[0] for f in found],
        attempt_ids=[f[1] for f in found],
        sids=[f[2] for f in found],
    )
    return {r[0]: r[1] for r in rows}


@dataclass(frozen=True)
class DeadSweep:
    suppressed: list[tuple[str, int]]  # (reason, intent id)
    verifications_expired: int  # pending verifications past expiry marked expired by this batch


def sweep_dead(db: Database, limit: int) -> DeadSweep:
    """One batch: expire overdue pending verifications, suppress intents of dead ones."""
    rows = db.run(_SUPPRESS_DEAD, limit=limit)
    return DeadSweep(
        suppressed=[(r[0], r[1]) for r in rows if r[1] is not None],
        verifications_expired=sum(r[2] for r in rows if r[2] is not None),
    )
