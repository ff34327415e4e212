"""The reconciler against a real PostgreSQL: every duty, bounded batches, the watermark, the target.

The reconciler never sends: it only moves rows through outbox/transitions.py and housekeeping.
"""
from __future__ import annotations

import io
import json
import uuid
from dataclasses import replace

import pytest

from signup_verification.platform import logs as service_logging
from signup_verification.verifications import create as verifications
from signup_verification.api.models import CreateVerificationRequest
from signup_verification.platform.database import Database
from signup_verification.outbox import RetryPolicy, Settlement
from signup_verification.outbox import transitions as t
from signup_verification.outbox.policy import ChannelPolicy
from signup_verification.operations.reconciler import ReconcilerConfig, reconcile
from signup_verification.config import ConfigError, load
from signup_verification.verifications.tokens import Keyring
from support.paths import TEST_TOKEN_KEYS

from support.factories import CONFIG, KEYRING, CountingDatabase, SETTINGS, deliver, expire_leases, intent, make_verifications, run, statuses


# -- recovery duties -------------------------------------------------------------------------------
def test_expired_claim_becomes_eligible_again_and_is_not_an_attempt(db):
    make_verifications(db, 2)
    claimed = t.claim(db, "crashed", 2, 30)
    db.run("UPDATE delivery_intents SET lease_until = now() - interval '1 second' WHERE id = :id", id=claimed[0].id)
    report = run(db)
    assert report.moves["claims_expired"] == 1
    assert statuses(db) == {claimed[0].id: "ready", claimed[1].id: "claimed"}  # a current lease is left alone
    row = db.one("SELECT attempts, lease_owner FROM delivery_intents WHERE id = :id", id=claimed[0].id)
    assert row == {"attempts": 0, "lease_owner": None}
    assert db.run("SELECT count(*) FROM delivery_attempts") == [[0]]


def test_lost_lease_becomes_ambiguous_with_an_attempt_row(db):
    make_verifications(db, 1)
    [claimed] = t.claim(db, "crashed", 1, 30)
    t.begin_attempts(db, "crashed", [claimed.fence])
    expire_leases(db)
    report = run(db)
    assert report.moves["leases_lost"] == 1
    row = db.one("SELECT status, attempts, ambiguous_count, next_attempt_at > now() AS held FROM delivery_intents")
    assert row == {"status": "ambiguous", "attempts": 1, "ambiguous_count": 1, "held": True}
    log = db.run("SELECT attempt_id, outcome, error_class FROM delivery_attempts ORDER BY id")
    assert log == [[f"{claimed.id}:1", "attempting", None], [f"{claimed.id}:1", "ambiguous", "lease_lost"]]


@pytest.mark.parametrize("policy, expected", [("retry", "retryable"), ("fail", "failed"), ("hold", "ambiguous")])
def test_ambiguous_after_its_hold_follows_the_channel_policy(db, policy, expected):
    make_verifications(db, 1)
    [claimed] = t.claim(db, "w", 1, 30)
    t.begin_attempts(db, "w", [claimed.fence])
    t.settle(db, "w", [Settlement(claimed.id, claimed.lease_version, "ambiguous", 300, "timeout", "read timed out")])
    config = replace(CONFIG, policy=RetryPolicy(channels={"email": ChannelPolicy(policy, 300)}))
    assert run(db, config).moves["ambiguous_to_retryable"] == 0  # hold not over yet: nothing moves
    db.run("UPDATE delivery_intents SET next_attempt_at = now() - interval '1 second'")
    report = run(db, config)
    assert intent(db, claimed.verification_id)["status"] == expected
    assert report.moves["ambiguous_to_retryable"] == (expected == "retryable")
    assert report.moves["ambiguous_to_failed"] == (expected == "failed")


def test_dead_verifications_are_suppressed_and_expired_ones_counted_past_one_batch(db):
    ids = make_verifications(db, 5)
    deliver(db, limit=3)  # three accepted: their verifications expire with nothing to suppress
    db.run("UPDATE verifications SET created_at = now() - interval '1 hour', expires_at = now() - interval '1 second'")
    report = run(db, replace(CONFIG, batch_size=2))
    assert report.moves["verifications_expired"] == 5  # three batches of at most two
    assert report.moves["suppressed_expired"] == 2 and report.moves["suppressed"] == 2
    assert {intent(db, v)["suppression_reason"] for v in ids[3:]} == {"expired"}
    assert db.run("SELECT count(*) FROM verifications WHERE status = 'pending'") == [[0]]


def test_superseded_and_verified_intents_are_suppressed_with_their_reason(db):
    [first] = make_verifications(db, 1)
    db.run("UPDATE verifications SET status = 'verified', verified_at = now()")
    [second] = make_verifications(db, 1, prefix="other")
    report = run(db)
    assert report.moves["suppressed_verified"] == 1
    assert intent(db, first)["suppression_reason"] == "verified"
    assert intent(db, second)["status"] == "ready"


def test_one_run_makes_at_most_one_transition_per_intent(db):
    """Zero hold: a lost lease becomes ambiguous in this run and retryable only in the next one."""
    make_verifications(db, 1)
    [claimed] = t.claim(db, "w", 1, 30)
    t.begin_attempts(db, "w", [claimed.fence])
    expire_leases(db)
    config = replace(CONFIG, policy=RetryPolicy(channels={"email": ChannelPolicy("retry", 0)}))
    assert run(db, config).moves["leases_lost"] == 1
    assert statuses(db) == {claimed.id: "ambiguous"}
    assert run(db, config).moves["ambiguous_to_retryable"] == 1
    assert statuses(db) == {claimed.id: "retryable"}


# -- horizon ---------------------------------------------------------------------------------------
def test_eligible_intents_past_the_polling_horizon_are_counted_and_logged(db, log_lines):
    make_verifications(db, 3)
    make_verifications(db, 1, channel="sms")
    db.run("UPDATE delivery_intents SET next_attempt_at = now() - interval '10 minutes' WHERE id IN (1, 2)")
    db.run("UPDATE delivery_intents SET next_attempt_at = now() + interval '10 minutes' WHERE id = 3")  # scheduled
    report = run(db)
    assert report.as_json()["overdue"] == {"email": {"count": 2, "oldest_seconds": pytest.approx(600, abs=5)}}
    [warning] = log_lines.events("overdue_eligible")
    assert warning["severity"] == "WARNING" and warning["overdue_count"] == 2 and warning["channel"] == "email"
    assert statuses(db) == {1: "ready", 2: "ready", 3: "ready", 4: "ready"}  # counted, never moved or sent


# -- housekeeping ----------------------------------------------------------------------------------
def test_expired_idempotency_keys_are_reaped_and_live_ones_kept(db):
    make_verifications(db, 3)
    db.run("UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE key <> 'acct-email-0'")
    report = run(db, replace(CONFIG, batch_size=1))
    assert report.moves["idempotency_keys_reaped"] == 2
    assert db.run("SELECT key FROM idempotency_keys") == [["acct-email-0"]]


def _age_history(db: Database, days: int) -> None:
    db.run("UPDATE verifications SET created_at = now() - make_interval(days => :d), "
           "expires_at = now() - make_interval(days => :d) + interval '10 minutes'", d=days)
    db.run("UPDATE delivery_intents SET completed_at = now() - make_interval(days => :d) "
           "WHERE completed_at IS NOT NULL", d=days)


def test_retention_redacts_destinations_then_purges_history(db):
    ids = make_verifications(db, 2)
    [claimed] = t.claim(db, "w", 1, 30)
    t.begin_attempts(db, "w", [claimed.fence])
    t.settle(db, "w", [Settlement(claimed.id, claimed.lease_version, "failed", 0, "smtp_5xx",
                                  "550 5.1.1 <User0.acct@Example.com>: Recipient address rejected")])
    run(db)  # nothing is old yet
    assert db.run("SELECT count(*) FROM verifications WHERE destination IS NULL") == [[0]]

    _age_history(db, 31)
    report = run(db)  # the second intent expires and is suppressed, then both are redacted
    assert report.moves["destinations_redacted"] == 2 and report.moves["verifications_purged"] == 0
    rows = db.rows("SELECT destination, redacted_at IS NOT NULL AS redacted FROM verifications")
    assert rows == [{"destination": None, "redacted": True}] * 2
    details = [r[0] for r in db.run("SELECT error_detail FROM delivery_attempts WHERE error_detail IS NOT NULL")]
    assert details == ["550 5.1.1 <[redacted]>: Recipient address rejected"]
    assert "example.com" not in intent(db, ids[0])["last_error"].lower()

    _age_history(db, 91)
    report = run(db)
    assert report.moves["verifications_purged"] == 2
    for table in ("verifications", "delivery_intents", "delivery_attempts"):
        assert db.run(f"SELECT count(*) FROM {table}") == [[0]], table


def test_retention_leaves_live_and_recent_work_alone(db):
    [old, recent] = make_verifications(db, 2)
    db.run("UPDATE verifications SET created_at = now() - interval '100 days', expires_at = now() + interval '1 day'"
           " WHERE id = :id", id=old)  # still pending: its intent is live
    report = run(db, replace(CONFIG, redact_after_seconds=0, purge_after_seconds=0))
    assert report.moves["destinations_redacted"] == 0 and report.moves["verifications_purged"] == 0
    assert db.run("SELECT count(*) FROM verifications WHERE destination IS NOT NULL") == [[2]]


def test_purge_keeps_a_verification_another_one_still_points_at(db):
    """`older.superseded_by = newer`: newer may only go with or after older (the foreign key)."""
    [older] = make_verifications(db, 1)
    [newer] = make_verifications(db, 1, prefix="acct", key="again")  # same account: supersedes `older`
    assert db.one("SELECT superseded_by FROM verifications WHERE id = :id", id=older)["superseded_by"] == newer
    deliver(db)
    _age_history(db, 100)
    # The newer history finished first (it can: the older intent was mid-send when superseded).
    db.run("UPDATE delivery_intents SET completed_at = completed_at - interval '1 hour' WHERE verification_id = :v", v=newer)
    config = replace(CONFIG, batch_size=1)
    report = run(db, config)
    assert report.moves["destinations_redacted"] == 2
    assert report.moves["verifications_purged"] == 0  # newer first in line, held back by older
    config = replace(CONFIG, batch_size=2)
    assert run(db, config).moves["verifications_purged"] == 2


def test_retention_windows_must_be_ordered():
    with pytest.raises(ConfigError):
        ReconcilerConfig(redact_after_seconds=90, purge_after_seconds=30)
    with pytest.raises(ConfigError):
        load({"RETENTION_REDACT_AFTER_DAYS": "10", "RETENTION_PURGE_AFTER_DAYS": "5"})
    config = load({"RECONCILE_BATCH_SIZE": "50", "RETENTION_PURGE_AFTER_DAYS": "365"}).reconciler
    assert (config.batch_size, config.purge_after_seconds) == (50, 365 * 86400)


# -- bounded batches and the watermark -----------------------------------------------------------------
def test_bounded_run_leaves_a_backlog_and_the_watermark_waits_for_a_drained_run(db):
    make_verifications(db, 5)
    t.claim(db, "crashed", 5, 30)
    expire_leases(db)
    config = replace(CONFIG, batch_size=2, max_batches=1)
    first = run(db, config)
    assert first.moves["claims_expired"] == 2 and not first.drained
    assert first.watermark["backlog"] == ["expire_claims"] and first.watermark["covered_through"] is None
    second = run(db, replace(config, max_batches=10))
    assert second.moves["claims_expired"] == 3 and second.drained
    row = db.one("SELECT last_started_at, last_completed_at, watermark FROM worker_heartbeats WHERE name = 'reconcile:test'")
    assert row["watermark"]["covered_through"] == row["last_started_at"].isoformat()
    assert row["last_completed_at"] >= row["last_started_at"]
    third = run(db, config)
    assert third.watermark["covered_through"] > second.watermark["covered_through"]


def test_a_second_concurrent_run_is_skipped(db, database_url):
    other = Database.from_url(database_url)
    try:
        other.run("SELECT pg_advisory_lock(hashtextextended('reconcile:test', 0))")
        report = run(db)
        assert report.skipped and report.as_json()["skipped"]
        assert db.run("SELECT count(*) FROM worker_heartbeats") == [[0]]
        other.run("SELECT pg_advisory_unlock_all()")  # the other run ends
    finally:
        other.close()
    assert not run(db).skipped


def test_statements_per_run_stay_constant_when_there_is_nothing_to_do(db):
    """A quiet sweep costs the same with 0 or 300 finished intents: one statement per duty."""
    counts = []
    for extra in (0, 300):
        if extra:
            make_verifications(db, extra, prefix="bulk")
            deliver(db)
        spy = CountingDatabase(db)
        run(spy)
        counts.append(spy.statements)
    assert counts[0] == counts[1]


# -- the entry point -----------------------------------------------------------------------------------
def test_reconcile_target_answers_counts_and_never_sends(app_client, db):
    make_verifications(db, 2)
    claimed = t.claim(db, "crashed", 2, 30)
    t.begin_attempts(db, "crashed", [claimed[1].fence])
    expire_leases(db)
    client = app_client("reconcile")
    assert client.get("/").status_code == 405
    response = client.post("/")
    assert response.status_code == 200
    body = response.get_json()
    assert body["moves"]["claims_expired"] == 1 and body["moves"]["leases_lost"] == 1
    assert body["drained"] is True and body["watermark"]["covered_through"]
    assert set(body["duties"]) == {"suppress_dead", "resolve_ambiguous", "expire_claims", "lose_leases",
                                   "reap_idempotency_keys", "redact_destinations", "purge_history"}
    # Never a send: no accepted outcome, no new attempt begun, nothing claimed.
    outcomes = [r[0] for r in db.run("SELECT outcome FROM delivery_attempts ORDER BY id")]
    assert outcomes == ["attempting", "ambiguous"]
    assert db.run("SELECT count(*) FROM delivery_intents WHERE status IN ('claimed', 'attempting', 'accepted')") == [[0]]


def test_reconcile_logs_one_run_record_and_one_signals_record_per_channel(app_client, db, log_lines):
    make_verifications(db, 1)
    client = app_client("reconcile")
    service_logging.configure(fmt="json", deployment="test")  # main.py configured at import
    assert client.post("/").status_code == 200
    runs = log_lines.events("reconcile")
    assert len(runs) == 1 and runs[0]["claims_expired"] == 0 and runs[0]["drained"] is True
    signal_records = log_lines.events("signals")
    assert sorted(r["channel"] for r in signal_records) == ["email", "sms"]
    assert all(r["source"] == "reconcile" and r["reconciler_watermark_age_seconds"] is not None
               for r in signal_records)
