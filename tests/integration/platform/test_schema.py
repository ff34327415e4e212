"""The database itself enforces the state model's invariants, whatever code (or operator) writes to it."""

from __future__ import annotations

import json
import uuid

import pytest

from signup_verification.platform.catalogue import catalogue
from signup_verification.platform.channels import DELIVERY_CHANNELS
from signup_verification.platform.database import Database, DatabaseError

UNIQUE, CHECK, NOT_NULL, REFUSED = "23505", "23514", "23502", "42501"


def sqlstate(exc: DatabaseError) -> str:
    return exc.args[0]["C"]


def refused(db: Database, sql: str, code: str, **params) -> None:
    with pytest.raises(DatabaseError) as caught:
        with db.transaction():
            db.run(sql, **params)
    assert sqlstate(caught.value) == code, f"{sql}: {caught.value}"


def add_verification(db: Database, **columns) -> uuid.UUID:
    row = {
        "id": uuid.uuid4(),
        "account_id": "acct",
        "channel": "email",
        "destination": "ada@example.com",
        "purpose": "signup",
        "locale": "en",
        "key_id": "k1",
        "token_nonce": b"n" * 16,
        "token_digest": uuid.uuid4().bytes * 2,
        "expires_at_s": 600,
        **columns,
    }
    db.run(
        "INSERT INTO verifications (id, account_id, channel, destination, purpose, locale, key_id, token_nonce,"
        " token_digest, expires_at) VALUES (:id, :account_id, :channel, :destination, :purpose, :locale, :key_id,"
        " :token_nonce, :token_digest, now() + make_interval(secs => :expires_at_s))",
        **row,
    )
    return row["id"]


def add_intent(db: Database, verification_id: uuid.UUID, **columns) -> int:
    row = {
        "status": "ready",
        "lease_owner": None,
        "lease_until_s": None,
        "suppression_reason": None,
        "completed": False,
        "next_s": 0,
        "attempts": 0,
        **columns,
    }
    return db.run(
        "INSERT INTO delivery_intents (verification_id, channel, purpose, locale, template_version, status,"
        " lease_owner, lease_until, suppression_reason, completed_at, next_attempt_at, attempts)"
        " VALUES (:vid, 'email', 'signup', 'en', 'signup/v1', :status, :lease_owner,"
        " now() + make_interval(secs => CAST(:lease_until_s AS integer)), :suppression_reason,"
        " CASE WHEN :completed THEN now() END, now() + make_interval(secs => :next_s), :attempts) RETURNING id",
        vid=verification_id,
        **row,
    )[0][0]


def add_attempt(db: Database, intent_id: int, n: int = 1, outcome: str = "attempting") -> None:
    db.run(
        "INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version, outcome)"
        " VALUES (:aid, :iid, :n, 'email', 'signup/v1', :outcome)",
        aid=f"{intent_id}:{n}",
        iid=intent_id,
        n=n,
        outcome=outcome,
    )


# -- one logical delivery per verification ------------------------------------------------------------


def test_a_second_intent_for_one_verification_is_refused_by_the_database(db):
    vid = add_verification(db)
    add_intent(db, vid)
    with pytest.raises(DatabaseError) as caught:
        add_intent(db, vid)
    assert sqlstate(caught.value) == UNIQUE
    assert db.run("SELECT count(*)::int FROM delivery_intents")[0][0] == 1


def test_a_verification_cannot_be_deleted_from_under_its_intents(db):
    """No foreign key (its insert-time check cost ~45 µs per intent): the delete side is
    the no_orphans trigger's, and the purge deletes a verification and its intents together."""
    vid = add_verification(db)
    add_intent(db, vid)
    with pytest.raises(DatabaseError) as caught:
        db.run("DELETE FROM verifications WHERE id = :id", id=vid)
    assert sqlstate(caught.value) == "23503"
    assert db.run("SELECT count(*)::int FROM verifications")[0][0] == 1
    db.run(
        "WITH i AS (DELETE FROM delivery_intents WHERE verification_id = :id) DELETE FROM verifications WHERE id = :id",
        id=vid,
    )
    assert db.run("SELECT count(*)::int FROM verifications")[0][0] == 0


# -- vocabularies and lease columns -------------------------------------------------------------------

BAD_INTENTS = [
    {"status": "sent"},  # not in the vocabulary
    {"status": "claimed"},  # claimed without a lease
    {"status": "attempting", "lease_owner": "w1"},  # lease without an expiry
    {"status": "ready", "lease_owner": "w1", "lease_until_s": 30},  # a lease on an unowned row
    {"status": "retryable", "lease_until_s": 30},
    {"status": "suppressed", "completed": True},  # suppressed without a reason
    {"status": "ready", "suppression_reason": "superseded"},  # a reason without suppression
    {"status": "accepted"},  # finished without completed_at
    {"status": "ready", "completed": True},  # completed but still eligible
    {"attempts": 6},  # more attempts than allowed
    {"attempts": -1},
]


def test_intent_check_constraints(db):
    vid = add_verification(db)
    for columns in BAD_INTENTS:
        with pytest.raises(DatabaseError) as caught:
            add_intent(db, vid, **columns)
        assert sqlstate(caught.value) == CHECK, json.dumps(columns)
    assert db.run("SELECT count(*)::int FROM delivery_intents")[0][0] == 0


GOOD_INTENTS = [
    {"status": "ready"},
    {"status": "retryable"},
    {"status": "ambiguous"},
    {"status": "claimed", "lease_owner": "w1", "lease_until_s": 30},
    {"status": "attempting", "lease_owner": "w1", "lease_until_s": 30},
    {"status": "accepted", "completed": True},
    {"status": "failed", "completed": True},
    {"status": "suppressed", "suppression_reason": "expired", "completed": True},
]


def test_every_consistent_intent_state_is_accepted(db):
    for columns in GOOD_INTENTS:
        add_intent(db, add_verification(db, account_id=columns["status"]), **columns)
    assert db.run("SELECT count(*)::int FROM delivery_intents")[0][0] == len(GOOD_INTENTS)


BAD_VERIFICATION_UPDATES = [
    "UPDATE verifications SET status = 'confirmed'",
    "UPDATE verifications SET status = 'verified'",  # verified needs verified_at
    "UPDATE verifications SET verified_at = now()",  # verified_at needs verified
    "UPDATE verifications SET status = 'superseded'",  # superseded needs superseded_by
    "UPDATE verifications SET channel = 'fax'",
    "UPDATE verifications SET expires_at = created_at",
    "UPDATE verifications SET token_digest = '\\x00'::bytea",
    "UPDATE verifications SET token_nonce = '\\x0011'::bytea",
    "UPDATE verifications SET confirm_failures = -1",
]


def test_verification_check_constraints(db):
    add_verification(db)
    for sql in BAD_VERIFICATION_UPDATES:
        refused(db, sql, CHECK)
    assert db.one("SELECT status, channel FROM verifications") == {"status": "pending", "channel": "email"}


def test_idempotency_keys_are_unique_per_scope_and_bounded(db):
    insert = (
        "INSERT INTO idempotency_keys (scope, key, fingerprint, expires_at)"
        " VALUES (:scope, :key, '\\x00'::bytea, now() + interval '1 day')"
    )
    db.run(insert, scope="create_verification", key="k")
    db.run(insert, scope="other", key="k")
    refused(db, insert, UNIQUE, scope="create_verification", key="k")
    refused(db, insert, CHECK, scope="create_verification", key="")
    refused(db, insert, CHECK, scope="create_verification", key="k" * 256)


# -- the append-only attempt log ----------------------------------------------------------------------


@pytest.fixture
def attempt_log(db) -> int:
    intent = add_intent(db, add_verification(db), status="attempting", lease_owner="w1", lease_until_s=30)
    add_attempt(db, intent, 1, "attempting")
    add_attempt(db, intent, 1, "accepted")
    return intent


def test_delivery_attempts_refuse_update_delete_and_truncate(db, attempt_log):
    for sql in (
        "UPDATE delivery_attempts SET outcome = 'failed'",
        "UPDATE delivery_attempts SET provider_ref = 'x'",
        "DELETE FROM delivery_attempts",
        "TRUNCATE delivery_attempts",
        "TRUNCATE delivery_attempts CASCADE",
    ):
        refused(db, sql, REFUSED)
    assert db.run("SELECT outcome, provider_ref FROM delivery_attempts ORDER BY id") == [
        ["attempting", None],
        ["accepted", None],
    ]


def test_the_retention_purge_may_delete_inside_its_own_transaction_only(db, attempt_log):
    with db.transaction():
        db.execute_script("SET LOCAL signup_verification.retention_purge = 'on'")
        db.run("DELETE FROM delivery_attempts WHERE outcome = 'attempting'")
    assert db.run("SELECT outcome FROM delivery_attempts") == [["accepted"]]
    # SET LOCAL ended with the transaction: the same session is refused again.
    refused(db, "DELETE FROM delivery_attempts", REFUSED)
    with pytest.raises(DatabaseError) as caught:
        with db.transaction():
            db.execute_script("SET LOCAL signup_verification.retention_purge = 'yes'")  # only 'on' opens it
            db.run("DELETE FROM delivery_attempts")
    assert sqlstate(caught.value) == REFUSED
    assert db.run("SELECT count(*)::int FROM delivery_attempts")[0][0] == 1


def test_attempt_rows_are_unique_per_attempt_and_outcome(db, attempt_log):
    with pytest.raises(DatabaseError) as caught:
        add_attempt(db, attempt_log, 1, "accepted")
    assert sqlstate(caught.value) == UNIQUE
    with pytest.raises(DatabaseError) as caught:
        add_attempt(db, attempt_log, 2, "delivered")
    assert sqlstate(caught.value) == CHECK


def test_the_attempt_log_has_no_column_for_a_token_or_destination(db):
    columns = {
        r[0]
        for r in db.run("SELECT column_name FROM information_schema.columns WHERE table_name = 'delivery_attempts'")
    }
    assert not {c for c in columns if "token" in c or "destination" in c or "code" in c or "nonce" in c}
    columns = {
        r[0] for r in db.run("SELECT column_name FROM information_schema.columns WHERE table_name = 'verifications'")
    }
    assert "token" not in columns and {"token_nonce", "token_digest", "key_id"} <= columns


# -- eligibility: one definition, served by the partial index -----------------------------------------


def test_the_eligible_view_holds_due_ready_and_retryable_intents_only(db):
    expected = set()
    for columns in (
        {"status": "ready"},
        {"status": "retryable"},
        {"status": "ready", "next_s": 300},
        {"status": "ambiguous"},
        {"status": "claimed", "lease_owner": "w", "lease_until_s": 30},
        {"status": "accepted", "completed": True},
        {"status": "suppressed", "suppression_reason": "expired", "completed": True},
    ):
        intent = add_intent(db, add_verification(db, account_id=str(uuid.uuid4())), **{"next_s": -1, **columns})
        if columns["status"] in ("ready", "retryable") and "next_s" not in columns:
            expected.add(intent)
    assert {r[0] for r in db.run("SELECT id FROM eligible_delivery_intents")} == expected


def test_claim_and_oldest_age_read_the_partial_index_whatever_the_history(db):
    """20k finished intents and 10 eligible ones: the planner must go through the eligible index."""
    db.execute_script("""
        INSERT INTO verifications (id, account_id, channel, destination, purpose, locale, key_id, token_nonce,
                                   token_digest, expires_at, status, verified_at)
        SELECT gen_random_uuid(), 'a' || g, 'email', 'u' || g || '@example.com', 'signup', 'en', 'k1',
               '\\x00000000000000000000000000000000'::bytea, sha256(int4send(g)), now() + interval '10 minutes',
               CASE WHEN g <= 20000 THEN 'verified' ELSE 'pending' END, CASE WHEN g <= 20000 THEN now() END
          FROM generate_series(1, 20010) g;
        INSERT INTO delivery_intents (verification_id, channel, purpose, locale, template_version, status,
                                      completed_at)
        SELECT id, 'email', 'signup', 'en', 'signup/v1', CASE WHEN status = 'verified' THEN 'accepted' ELSE 'ready' END,
               CASE WHEN status = 'verified' THEN now() END FROM verifications;
        ANALYZE verifications; ANALYZE delivery_intents;
    """)
    claim, probe = catalogue("outbox")["claim"], catalogue("outbox")["idle_probe"]
    for name, value in (
        ("owner", "'w'"),
        ("email_limit", "10"),
        ("sms_limit", "10"),
        ("whatsapp_limit", "10"),
        ("voice_limit", "10"),
        ("webhook_limit", "10"),
        ("limit", "10"),
        ("lease_seconds", "30"),
        ("sms_max", "NULL"),
        ("voice_max", "NULL"),
        ("begin", "true"),
        ("dead_within", "0"),
        ("name", "'dispatch:t'"),
    ):
        claim, probe = claim.replace(f":{name}", value), probe.replace(f":{name}", value)
    for query in (claim, probe, "SELECT min(next_attempt_at) FROM eligible_delivery_intents WHERE channel = 'sms'"):
        plan = "\n".join(r[0] for r in db.run("EXPLAIN " + query))
        assert "delivery_intents_eligible" in plan and "Seq Scan on delivery_intents" not in plan, plan
    # each channel's range by itself, so one channel's backlog is never scanned past for another's
    plan = "\n".join(r[0] for r in db.run("EXPLAIN " + claim))
    for channel in DELIVERY_CHANNELS:
        assert f"Index Cond: ((channel = '{channel}'::text)" in plan, plan
