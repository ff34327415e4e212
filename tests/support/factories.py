"""Factories: verifications made through the real create path, and the worker's moves in one call.

One verification factory for every tier that needs rows (reconciler, signals, runbook, inspect).
"""

from __future__ import annotations

import uuid
from typing import Any

from signup_verification.api import create as verifications
from signup_verification.api.create import Answer
from signup_verification.api.models import CreateVerificationRequest
from signup_verification.operations.config import ReconcilerConfig
from signup_verification.operations.reconciler.runner import reconcile
from signup_verification.outbox import transitions as t
from signup_verification.outbox.transitions import Settlement
from signup_verification.platform.database import Database
from signup_verification.verifications.config import CreateConfig
from signup_verification.verifications.tokens import Keyring
from support.config import make_config
from support.paths import TEST_TOKEN_KEYS

SETTINGS = make_config(rate_limit_per_hour=100_000, rate_limit_spacing_seconds=0, deployment="test")
KEYRING = Keyring.parse(TEST_TOKEN_KEYS)
CONFIG = SETTINGS.reconciler


def create(
    db: Database,
    destination: str = "ada@example.com",
    *,
    account: str | None = None,
    key: str | None = None,
    config: CreateConfig = SETTINGS.create,
    keyring: Keyring = KEYRING,
    **fields: Any,
) -> Answer:
    """One create through the real path (api/create.py, as the create target runs it): the channel is
    the destination's (an address or a number) unless `channel=` says, the account and the
    Idempotency-Key fresh unless named, any other request field as given (fallback, locale, ...).
    The answer (status, body); a refused request raises its Problem."""
    request = CreateVerificationRequest.model_validate(
        {
            "account_id": account or f"acct-{uuid.uuid4().hex[:8]}",
            "channel": "email" if "@" in destination else "sms",
            "destination": destination,
            **fields,
        }
    )
    return verifications.create_verification(db, config, keyring, request, key or f"k-{uuid.uuid4()}")


def created(db: Database, destination: str = "ada@example.com", **options: Any) -> uuid.UUID:
    """create(), which must succeed (201): the new verification's id."""
    answer = create(db, destination, **options)
    assert answer.status == 201, answer.body
    return uuid.UUID(answer.body["verification_id"])


def make_verifications(
    db: Database, n: int, channel: str = "email", prefix: str = "acct", key: str | None = None
) -> list[uuid.UUID]:
    return [
        created(
            db,
            f"user{i}.{prefix}@example.com" if channel == "email" else f"+1415555{i:04d}",
            account=f"{prefix}-{channel}-{i}",
            key=f"{key or prefix}-{channel}-{i}",
        )
        for i in range(n)
    ]


def written(db: Database) -> tuple[int, ...]:
    """What creates wrote: verifications, intents, idempotency records, create events (not refusals)."""
    return tuple(
        db.run(
            "SELECT (SELECT count(*) FROM verifications)::int, (SELECT count(*) FROM delivery_intents)::int,"
            " (SELECT count(*) FROM idempotency_keys)::int,"
            " (SELECT count(*) FROM create_events WHERE role <> 'refused')::int"
        )[0]
    )


def intent(db: Database, verification_id: uuid.UUID) -> dict:
    """Its message intent (a webhook event is an intent of the verification too)."""
    return db.one("SELECT * FROM delivery_intents WHERE verification_id = :v AND role = 'primary'", v=verification_id)


def statuses(db: Database) -> dict[int, str]:
    return {row[0]: row[1] for row in db.run("SELECT id, status FROM delivery_intents ORDER BY id")}


def expire_leases(db: Database) -> None:
    """'Wait for lease expiry' without waiting: the lease ends in the past."""
    db.run("UPDATE delivery_intents SET lease_until = now() - interval '1 second' WHERE lease_until IS NOT NULL")


def deliver(db: Database, owner: str = "worker", limit: int = 1000, outcome: str = "accepted") -> list[int]:
    """What the worker does: claim, begin, settle (through the outbox transitions)."""
    claimed = t.claim(db, owner, limit, 30)
    t.begin_attempts(db, owner, [c.fence for c in claimed])
    t.settle(db, owner, [Settlement(c.id, c.lease_version, outcome) for c in claimed])
    return [c.id for c in claimed]


def run(db: Database, config: ReconcilerConfig = CONFIG):
    return reconcile(db, config, emit_signals=False)


class CountingDatabase:
    """The real database, counting the statements (round trips) the reconciler sends."""

    def __init__(self, db: Database):
        self._db, self.statements = db, 0

    def __getattr__(self, name):
        return getattr(self._db, name)

    def run(self, sql, **params):
        self.statements += 1
        return self._db.run(sql, **params)

    def rows(self, sql, **params):
        self.statements += 1
        return self._db.rows(sql, **params)

    def one(self, sql, **params):
        found = self.rows(sql, **params)
        return found[0] if found else None


# The create answer an idempotency record replays (its inputs as columns, rebuilt by created_answer_v2).
STORED_ANSWER = (
    "SELECT key, outcome, created_answer_v2(verification_id, account_id, channel, created_at,"
    " verification_expires_at, fallback_channel, fallback_after_seconds, step3_channel, step3_after_seconds) AS answer"
    " FROM idempotency_keys WHERE key = :key"
)
