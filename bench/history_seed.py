"""The history and the live set bench/history_bench.py measures on, seeded set-based.

History: finished verifications, each with its accepted intent and two attempt rows, spread evenly
over the last 60 days (those older than 30 days already redacted), inserted in chunks with INSERT
... SELECT generate_series; nothing is disabled (the attempt log's append-only trigger only refuses
UPDATE and DELETE). bench/capacity_bench.py and bench/cost_bench.py seed their history with it too.
The live set, the same for every size, is made through the worker's own transitions (overdue
eligible work, abandoned claims, lost leases, ambiguous intents past their hold, expired pending
verifications, expired idempotency keys) and removed again after each repeat.
"""

from __future__ import annotations

import time
import uuid

import common
from common import log
from signup_verification.outbox import transitions
from signup_verification.outbox.transitions import Settlement
from signup_verification.platform.database import ConnectionParams, Database

LIVE = {
    "overdue_ready": 200,
    "abandoned_claims": 50,
    "lost_leases": 50,
    "ambiguous_due": 50,
    "expired_pending": 50,
    "expired_keys": 100,
}

SEED_HISTORY = """
WITH v AS (
    INSERT INTO verifications (id, account_id, channel, destination, purpose, locale, key_id, token_nonce,
                               token_digest, status, expires_at, created_at, updated_at, verified_at, redacted_at)
    SELECT uuid_generate_v4_compat(g), 'hist-' || g, CASE WHEN g % 4 = 0 THEN 'sms' ELSE 'email' END,
           CASE WHEN t.created < now() - interval '30 days' THEN NULL
                WHEN g % 4 = 0 THEN '+1415' || lpad((g % 10000000)::text, 7, '0') ELSE 'h' || g || '@example.com' END,
           'signup', 'en', 'bench', substring(sha256(('n' || g)::bytea) FOR 16), sha256(('d' || g)::bytea),
           CASE WHEN g % 3 = 0 THEN 'expired' ELSE 'verified' END,
           t.created + interval '10 minutes', t.created, t.created + interval '1 minute',
           CASE WHEN g % 3 = 0 THEN NULL ELSE t.created + interval '1 minute' END,
           CASE WHEN t.created < now() - interval '30 days' THEN t.created + interval '30 days' END
      FROM generate_series(:first::bigint, :last::bigint) AS g,
           -- spread evenly over the last 60 days, whatever the size
           LATERAL (SELECT now() - interval '60 days' + (g::float8 / :total::float8) * interval '60 days' AS created) AS t
    RETURNING id, channel, created_at
), i AS (
    INSERT INTO delivery_intents (verification_id, channel, purpose, locale, template_version, status, attempts,
                                  lease_version, next_attempt_at, created_at, updated_at, last_claimed_at,
                                  completed_at, provider_ref)
    SELECT v.id, v.channel, 'signup', 'en', 'signup/v1', 'accepted', 1, 1, v.created_at, v.created_at,
           v.created_at + interval '1 second', v.created_at, v.created_at + interval '1 second', 'bench'
      FROM v
    RETURNING id, channel, template_version, created_at
)
INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version, lease_owner,
                               lease_version, outcome, provider_ref, claimed_at, attempted_at, observed_at)
SELECT i.id || ':1', i.id, 1, i.channel, i.template_version, 'bench', 1, o.outcome,
       CASE WHEN o.outcome = 'accepted' THEN 'bench' END, i.created_at, i.created_at, i.created_at + o.after
  FROM i, (VALUES ('attempting', interval '0'), ('accepted', interval '1 second')) AS o(outcome, after)
"""

UUID_FN = """
CREATE OR REPLACE FUNCTION uuid_generate_v4_compat(n bigint) RETURNS uuid LANGUAGE sql IMMUTABLE AS
$$ SELECT encode(substring(sha256(('u' || n)::bytea) FOR 16), 'hex')::uuid $$
"""

BYTES_FN = """
CREATE OR REPLACE FUNCTION gen_random_bytes_compat(n integer) RETURNS bytea LANGUAGE sql AS
$$ SELECT substring(sha256(random()::text::bytea) FOR n) $$
"""


def fresh_database(params: ConnectionParams, name: str) -> Database:
    db = common.fresh_database(params, name)
    db.run(UUID_FN)
    db.run(BYTES_FN)
    return db


def seed_history(db: Database, size: int, chunk: int = 50_000) -> float:
    started = time.perf_counter()
    for first in range(1, size + 1, chunk):
        db.run(SEED_HISTORY, first=first, last=min(first + chunk - 1, size), total=size)
        log(f"  history {min(first + chunk - 1, size):,} / {size:,}")
    db.execute_script("VACUUM ANALYZE")
    return time.perf_counter() - started


def _create(db: Database, n: int, tag: str) -> list[uuid.UUID]:
    """Live verifications + ready intents, set-based (the create path is not what is measured)."""
    rows = db.run(
        "WITH v AS (INSERT INTO verifications (id, account_id, channel, destination, purpose, locale, key_id,"
        " token_nonce, token_digest, expires_at)"
        " SELECT gen_random_uuid(), :tag || g, CASE WHEN g % 2 = 0 THEN 'sms' ELSE 'email' END,"
        " CASE WHEN g % 2 = 0 THEN '+1415555' || lpad(g::text, 4, '0') ELSE :tag || g || '@example.com' END,"
        " 'signup', 'en', 'bench', gen_random_bytes_compat(16), sha256((:tag || g || random())::bytea),"
        " now() + interval '10 minutes' FROM generate_series(1, :n::integer) AS g RETURNING id, channel)"
        " INSERT INTO delivery_intents (verification_id, channel, purpose, locale, template_version)"
        " SELECT id, channel, 'signup', 'en', 'signup/v1' FROM v RETURNING verification_id",
        tag=tag,
        n=n,
    )
    return [r[0] for r in rows]


def seed_live(db: Database) -> list[uuid.UUID]:
    """The same live set for every size, made through the worker's own transitions; returns its
    verification ids (for removal afterwards)."""
    in_flight = _create(db, LIVE["abandoned_claims"] + LIVE["lost_leases"] + LIVE["ambiguous_due"], "flight-")
    claimed = transitions.claim(db, "bench-worker", len(in_flight), 30)  # history is finished: only these
    claims = claimed[: LIVE["abandoned_claims"]]
    lost = claimed[len(claims) : len(claims) + LIVE["lost_leases"]]
    ambiguous = claimed[len(claims) + len(lost) :]
    transitions.begin_attempts(db, "bench-worker", [c.fence for c in lost + ambiguous])
    transitions.settle(
        db, "bench-worker", [Settlement(c.id, c.lease_version, "ambiguous", 0, "timeout", "bench") for c in ambiguous]
    )
    # the worker "crashes": its remaining leases expire
    db.run("UPDATE delivery_intents SET lease_until = now() - interval '1 second' WHERE lease_owner = 'bench-worker'")
    overdue = _create(db, LIVE["overdue_ready"], "overdue-")
    db.run(
        "UPDATE delivery_intents SET next_attempt_at = now() - interval '5 minutes' "
        "WHERE verification_id = ANY(:ids::uuid[])",
        ids=overdue,
    )
    expired = _create(db, LIVE["expired_pending"], "expired-")
    db.run(
        "UPDATE verifications SET created_at = now() - interval '1 hour', expires_at = now() - interval '1 second' "
        "WHERE id = ANY(:ids::uuid[])",
        ids=expired,
    )
    db.run(
        "INSERT INTO idempotency_keys (scope, key, fingerprint, expires_at) SELECT 'bench', 'k' || g, '\\x00', "
        "now() - interval '1 second' FROM generate_series(1, :n::integer) AS g ON CONFLICT DO NOTHING",
        n=LIVE["expired_keys"],
    )
    db.execute_script("ANALYZE delivery_intents, verifications")
    return in_flight + overdue + expired


def remove_live(db: Database, ids: list[uuid.UUID]) -> None:
    with db.transaction():
        db.execute_script("SET LOCAL signup_verification.retention_purge = 'on'")
        db.run(  # no foreign keys: attempts, create_events and intents go in the same statement
            "WITH a AS (DELETE FROM delivery_attempts WHERE intent_id IN"
            " (SELECT id FROM delivery_intents WHERE verification_id = ANY(:ids::uuid[]))),"
            " e AS (DELETE FROM create_events WHERE verification_id = ANY(:ids::uuid[])),"
            " i AS (DELETE FROM delivery_intents WHERE verification_id = ANY(:ids::uuid[]))"
            " DELETE FROM verifications WHERE id = ANY(:ids::uuid[])",
            ids=ids,
        )
    db.run("DELETE FROM worker_heartbeats")
    db.execute_script("VACUUM ANALYZE verifications, delivery_intents, delivery_attempts, idempotency_keys")
