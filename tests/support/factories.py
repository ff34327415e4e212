"""Factories: verifications made through the real create path, and the worker's moves in one call.

One verification factory for every tier that needs rows (reconciler, signals, runbook, inspect).
"""

from __future__ import annotations

import uuid

from signup_verification.api import create as verifications
from signup_verification.api.models import CreateVerificationRequest
from signup_verification.operations.config import ReconcilerConfig
from signup_verification.operations.reconciler.runner import reconcile
from signup_verification.outbox import transitions as t
from signup_verification.outbox.transitions import Settlement
from signup_verification.platform.database import Database
from signup_verification.verifications.tokens import Keyring
from support.config import make_config
from support.paths import TEST_TOKEN_KEYS

SETTINGS = make_config(rate_limit_per_hour=100_000, rate_limit_spacing_seconds=0, deployment="test")
KEYRING = Keyring.parse(TEST_TOKEN_KEYS)
CONFIG = SETTINGS.reconciler


def make_verifications(
    db: Database, n: int, channel: str = "email", prefix: str = "acct", key: str | None = None
) -> list[uuid.UUID]:
    ids = []
    for i in range(n):
        destination = f"user{i}.{prefix}@example.com" if channel == "email" else f"+1415555{i:04d}"
        request = CreateVerificationRequest(
            account_id=f"{prefix}-{channel}-{i}", channel=channel, destination=destination
        )
        result = verifications.create_verification(
            db, SETTINGS.create, KEYRING, request, f"{key or prefix}-{channel}-{i}"
        )
        ids.append(uuid.UUID(result.body["verification_id"]))
    return ids


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


# The create answer an idempotency record replays (its inputs as columns, rebuilt by created_answer).
STORED_ANSWER = (
    "SELECT key, outcome, created_answer(verification_id, account_id, channel, created_at,"
    " verification_expires_at, fallback_channel, fallback_after_seconds) AS answer"
    " FROM idempotency_keys WHERE key = :key"
)
