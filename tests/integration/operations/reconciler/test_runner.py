"""One reconcile run: the duties in order, one transition per intent per run, bounded batches,
the watermark, the single-runner guard, and the reconcile target.

The reconciler never sends: it only moves rows through outbox/transitions.py and housekeeping."""

from __future__ import annotations

from dataclasses import replace

from signup_verification.outbox import transitions as t
from signup_verification.outbox.config import ChannelPolicy, RetryPolicy
from signup_verification.platform import logs as service_logging
from signup_verification.platform.channels import DELIVERY_CHANNELS
from signup_verification.platform.database import Database
from signup_verification.platform.timestamps import rfc3339
from support.factories import CONFIG, CountingDatabase, deliver, expire_leases, make_verifications, run, statuses


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
    row = db.one(
        "SELECT last_started_at, last_completed_at, watermark FROM worker_heartbeats WHERE name = 'reconcile:test'"
    )
    assert row["watermark"]["covered_through"] == rfc3339(row["last_started_at"])
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
    assert set(body["duties"]) == {
        "suppress_dead",
        "lookup_ambiguous_twilio",
        "resolve_ambiguous",
        "expire_claims",
        "lose_leases",
        "reap_idempotency_keys",
        "reap_refused_creates",
        "redact_destinations",
        "purge_history",
    }
    # Never a send: no accepted outcome, no new attempt begun, nothing claimed.
    outcomes = [r[0] for r in db.run("SELECT outcome FROM delivery_attempts ORDER BY id")]
    assert outcomes == ["attempting", "ambiguous"]
    assert db.run("SELECT count(*) FROM delivery_intents WHERE status IN ('claimed', 'attempting', 'accepted')") == [
        [0]
    ]


def test_reconcile_logs_one_run_record_and_one_signals_record_per_channel(app_client, db, log_lines):
    make_verifications(db, 1)
    client = app_client("reconcile")
    service_logging.configure(fmt="json", deployment="test")  # main.py configured at import
    assert client.post("/").status_code == 200
    runs = log_lines.events("reconcile")
    assert len(runs) == 1 and runs[0]["claims_expired"] == 0 and runs[0]["drained"] is True
    signal_records = log_lines.events("signals")
    assert sorted(r["channel"] for r in signal_records) == sorted(DELIVERY_CHANNELS)
    assert all(r["source"] == "reconcile" and r["reconciler_watermark_age_seconds"] is not None for r in signal_records)


def test_a_quiet_run_answers_every_move_name_at_zero_and_its_duties_in_sweep_order(db):
    """Dashboards and the runbook read these names: every one is present even when nothing moved."""
    body = run(db).as_json()
    assert body["moves"] == dict.fromkeys(
        [
            "suppressed_expired",
            "suppressed_superseded",
            "suppressed_verified",
            "suppressed_locked",
            "verifications_expired",
            "ambiguous_lookup_to_accepted",
            "ambiguous_lookup_to_retryable",
            "ambiguous_lookup_to_failed",
            "lookup_failed",
            "ambiguous_to_retryable",
            "ambiguous_to_failed",
            "claims_expired",
            "leases_lost",
            "idempotency_keys_reaped",
            "refused_creates_reaped",
            "destinations_redacted",
            "error_texts_scrubbed",
            "verifications_purged",
            "suppressed",
        ],
        0,
    )
    assert list(body["duties"]) == [
        "suppress_dead",
        "lookup_ambiguous_twilio",
        "resolve_ambiguous",
        "expire_claims",
        "lose_leases",
        "reap_idempotency_keys",
        "reap_refused_creates",
        "redact_destinations",
        "purge_history",
    ]
    assert body["overdue"] == {} and body["drained"] is True
