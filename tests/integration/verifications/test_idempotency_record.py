"""The idempotency record is written complete when it is inserted: one INSERT, no UPDATE,
and what it stores is exactly what the first answer said and what the verification row holds: the
answer's inputs as columns (not a jsonb copy of it), rebuilt by the function that built the first
answer (created_answer_v2)."""

from __future__ import annotations

from support.config import make_config
from support.factories import STORED_ANSWER, create

SETTINGS = make_config(rate_limit_per_hour=1000, rate_limit_spacing_seconds=0).create
WRITES = "SELECT n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_xact_user_tables WHERE relname = 'idempotency_keys'"


def _writes(tx, action) -> list[int]:
    """Rows action inserted, updated, deleted in idempotency_keys (a difference: the view may still
    hold earlier transactions' counts that were not flushed yet)."""
    [before] = tx.run(WRITES)
    result = action()
    [after] = tx.run(WRITES)
    return result, [a - b for a, b in zip(after, before, strict=True)]


def _create(db, key: str, account: str = "acct-1", **fields):
    return create(db, "ada@example.com", account=account, key=key, config=SETTINGS, **fields)


def test_a_create_inserts_its_record_complete_and_never_updates_it(db):
    with db.transaction() as tx:
        first, writes = _writes(tx, lambda: _create(tx, "k1"))
        assert writes == [1, 0, 0]
    assert first.status == 201
    record = db.one(STORED_ANSWER, key="k1")
    assert record["outcome"] == "created"
    assert record["answer"] == {k: first.body[k] for k in record["answer"]}
    assert set(record["answer"]) == {"verification_id", "account_id", "channel", "status", "expires_at", "created_at"}
    row = db.one(
        "SELECT rfc3339(created_at) AS created_at, rfc3339(expires_at) AS expires_at, status"
        " FROM verifications WHERE id = :id",
        id=first.body["verification_id"],
    )
    assert {k: record["answer"][k] for k in row} == row
    replay = _create(db, "k1")
    assert (replay.status, replay.body) == (201, first.body) and replay.headers.get("Idempotent-Replayed") == "true"


def test_an_expired_key_is_taken_over_in_one_update_with_the_new_answer(db):
    first = _create(db, "k2")
    db.run("UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE key = 'k2'")
    with db.transaction() as tx:
        second, writes = _writes(tx, lambda: _create(tx, "k2", account="acct-2"))
        assert writes == [0, 1, 0]
    assert second.body["verification_id"] != first.body["verification_id"]
    stored = db.one(STORED_ANSWER, key="k2")["answer"]
    assert stored["verification_id"] == second.body["verification_id"] and stored["account_id"] == "acct-2"
    replay = _create(db, "k2", account="acct-2")
    assert (replay.status, replay.body) == (201, second.body)


def test_a_replay_with_a_fallback_answers_its_policy_as_the_first_answer_did(db):
    fallback = {"channel": "sms", "destination": "+14155550123", "after_seconds": 30}
    first = _create(db, "k3", fallback=fallback)
    assert first.status == 201 and first.body["fallback"] == {
        "channel": "sms",
        "after_seconds": 30,
        "policy": "fallback",
    }
    replay = _create(db, "k3", fallback=fallback)
    assert (replay.status, replay.body) == (201, first.body)
