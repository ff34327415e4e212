"""Operator signals against a real PostgreSQL: the claim's eligibility, per channel, every field."""

from __future__ import annotations

import pytest

from signup_verification.operations import signal_records, signals
from signup_verification.operations.config import SignalsConfig
from signup_verification.outbox import transitions as t
from signup_verification.outbox.transitions import Settlement
from signup_verification.platform.channels import DELIVERY_CHANNELS
from support.factories import SETTINGS, CountingDatabase, deliver, make_verifications, run

AGREED_FIELDS = {
    "event",
    "channel",
    "deployment",
    "oldest_ready_verification_seconds",
    "ready_count",
    "reconciler_watermark_age_seconds",
    "ambiguous_count",
    "oscillating_count",
}


def by_channel(db, config: SignalsConfig | None = None) -> dict[str, signals.ChannelSignals]:
    return {c.channel: c for c in signals.compute(db, "test", config).channels}


def test_an_empty_outbox_reads_zero_and_every_channel_is_present(db):
    got = by_channel(db)
    assert set(got) == set(DELIVERY_CHANNELS)  # whatsapp and voice too
    assert all(c.ready_count == 0 and c.oldest_ready_verification_seconds == 0 for c in got.values())
    assert got["email"].last_claim_age_seconds is None and got["email"].reconciler_watermark_age_seconds is None


def test_only_eligible_intents_age_the_signal(db):
    make_verifications(db, 4)
    db.run("UPDATE delivery_intents SET next_attempt_at = now() - interval '90 seconds' WHERE id = 1")
    db.run("UPDATE delivery_intents SET next_attempt_at = now() + interval '10 minutes' WHERE id = 2")
    # suppressed long ago: dead work does not age the signal either
    db.run(
        "SELECT suppress_undelivered_intents(ARRAY[(SELECT verification_id FROM delivery_intents WHERE id = 3)],"
        " 'superseded')"
    )
    db.run("UPDATE delivery_intents SET next_attempt_at = now() - interval '1 hour' WHERE id = 3")
    email = by_channel(db)["email"]
    assert email.ready_count == 2  # ids 1 and 4
    assert email.scheduled_count == 1
    assert email.oldest_ready_verification_seconds == pytest.approx(90, abs=5)
    # The claim agrees: it takes exactly the intents the signal counts as ready.
    assert sorted(c.id for c in t.claim(db, "w", 10, 30)) == [1, 4]


def test_channels_are_split(db):
    make_verifications(db, 2)
    make_verifications(db, 3, channel="sms")
    db.run("UPDATE delivery_intents SET next_attempt_at = now() - interval '5 minutes' WHERE channel = 'sms'")
    got = by_channel(db)
    assert (got["email"].ready_count, got["sms"].ready_count) == (2, 3)
    assert got["email"].oldest_ready_verification_seconds < 60 < got["sms"].oldest_ready_verification_seconds


def test_in_flight_ambiguous_and_oscillating_counts(db):
    make_verifications(db, 4, channel="sms")
    claimed = t.claim(db, "w", 3, 30)
    t.begin_attempts(db, "w", [c.fence for c in claimed[:2]])
    t.settle(db, "w", [Settlement(claimed[0].id, claimed[0].lease_version, "ambiguous", 300, "timeout", "reset")])
    db.run("UPDATE delivery_intents SET lease_until = now() - interval '1 second' WHERE id = :id", id=claimed[2].id)
    # A retried intent that has been ambiguous twice is oscillating wherever it is now.
    db.run("UPDATE delivery_intents SET ambiguous_count = 2 WHERE id IN (:a, 4)", a=claimed[0].id)
    sms = by_channel(db)["sms"]
    assert (sms.claimed_count, sms.attempting_count, sms.expired_lease_count) == (1, 1, 1)
    assert (sms.ambiguous_count, sms.oscillating_count, sms.ready_count) == (1, 2, 1)


def test_attempts_by_outcome_over_the_window(db):
    make_verifications(db, 3)
    deliver(db, limit=2)
    deliver(db, outcome="retryable")
    # an old observation, outside the window (the log is append-only: inserted, not edited)
    db.run(
        "INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version,"
        " outcome, observed_at) VALUES ('1:9', 1, 9, 'email', 'v', 'failed', now() - interval '1 hour')"
    )
    email = by_channel(db, SignalsConfig(window_seconds=300))["email"]
    assert email.attempts == {
        "attempting": 3,
        "accepted": 2,
        "retryable": 1,
        "ambiguous": 0,
        "failed": 0,
        "released": 0,
        "delivered": 0,
    }
    assert by_channel(db, SignalsConfig(window_seconds=7200))["email"].attempts["failed"] == 1


def test_last_claim_and_reconciler_watermark_ages(db):
    db.run(
        "INSERT INTO worker_heartbeats (name, deployment, last_claim_at) "
        "VALUES ('dispatch:test', 'test', now() - interval '42 seconds')"
    )
    db.run("INSERT INTO worker_heartbeats (name, deployment, last_claim_at) VALUES ('dispatch:other', 'other', now())")
    run(db)
    snapshot = signals.compute(db, "test", with_workers=True)
    email = snapshot.channel("email")
    assert email.last_claim_age_seconds == pytest.approx(42, abs=5)
    assert 0 <= email.reconciler_watermark_age_seconds < 5
    assert [w["name"] for w in snapshot.workers] == ["dispatch:other", "dispatch:test", "reconcile:test"]
    assert snapshot.alerts() == []


def test_alerts_name_what_would_page(db):
    make_verifications(db, 1)
    db.run("UPDATE delivery_intents SET next_attempt_at = now() - interval '5 minutes'")
    alerts = signals.compute(db, "test", SignalsConfig(ready_age_alert_seconds=120)).alerts()
    assert any(a.startswith("email: oldest ready verification waited") for a in alerts)
    assert any(a.startswith("reconciler: no completed sweep") for a in alerts)


def test_compute_is_one_round_trip(db):
    make_verifications(db, 3)
    spy = CountingDatabase(db)
    signals.compute(spy, "test")
    assert spy.statements == 1


def test_emit_logs_one_record_per_channel_with_numeric_fields(db, log_lines):
    make_verifications(db, 2)
    db.run("UPDATE delivery_intents SET next_attempt_at = now() - interval '3 minutes' WHERE id = 1")
    signal_records.emit(db, SETTINGS.deployment, source="dispatch", config=SignalsConfig(ready_age_alert_seconds=120))
    records = log_lines.events("signals")
    assert [r["channel"] for r in records] == sorted(DELIVERY_CHANNELS)
    email, sms, _voice, webhook, _whatsapp = records
    assert AGREED_FIELDS <= set(email)
    assert email["logging.googleapis.com/labels"] == {
        "python_logger": "signup_verification.operations.signals",
        "deployment": "test",
        "channel": "email",
    }
    # email is past the threshold; sms has nothing live: DEBUG, and still written (the metrics count it)
    assert email["severity"] == "WARNING" and sms["severity"] == "DEBUG"
    assert isinstance(email["oldest_ready_verification_seconds"], float) and email["ready_count"] == 2
    assert email["source"] == "dispatch" and email["deployment"] == "test" and email["attempts_accepted"] == 0
    assert sms["oldest_ready_verification_seconds"] == 0


def test_the_reconcilers_run_writes_one_page_record_while_a_page_holds(db, log_lines):
    """What the small tier's digest page matches (infra/alerts_digest.tf): one `event="page"` record
    per reconciler run naming every page that holds, none while nothing does, none from dispatch."""
    config = SignalsConfig(ready_age_alert_seconds=120)
    run(db)  # a completed sweep: the watermark is fresh
    signal_records.emit(db, SETTINGS.deployment, source="reconcile", config=config)
    assert log_lines.events("page") == []
    make_verifications(db, 1)
    db.run("UPDATE delivery_intents SET next_attempt_at = now() - interval '5 minutes'")
    signal_records.emit(db, SETTINGS.deployment, source="dispatch", config=config)
    assert log_lines.events("page") == []  # the reconciler's alone: once a minute, whatever else runs
    signal_records.emit(db, SETTINGS.deployment, source="reconcile", config=config)
    [page] = log_lines.events("page")
    assert page["deployment"] == "test" and page["severity"] == "WARNING"
    assert [a.split(":")[0] for a in page["alerts"]] == ["email"]
    assert page["summary"].startswith("email: oldest ready verification waited")


def test_a_tick_that_moved_nothing_logs_its_signals_at_debug_while_work_waits(app_client, db, log_lines, monkeypatch):
    """A waiting fallback or backoff is no news every tick: the records of a dispatch that claimed
    nothing are DEBUG (hidden in text, README), those of one that sent are INFO."""
    make_verifications(db, 2)
    db.run("UPDATE delivery_intents SET next_attempt_at = now() + interval '10 minutes'")  # both scheduled
    monkeypatch.setenv("LOG_FORMAT", "json")  # main.py configures logging at import: JSON, into the sink
    dispatch = app_client("dispatch")
    assert dispatch.post("/").get_json()["claimed"] == 0

    def email_records():
        return [r for r in log_lines.events("signals") if r["channel"] == "email" and r["source"] == "dispatch"]

    [idle] = email_records()
    assert idle["scheduled_count"] == 2 and idle["severity"] == "DEBUG"
    db.run("UPDATE delivery_intents SET next_attempt_at = now() WHERE id = 1")
    assert dispatch.post("/").get_json()["claimed"] == 1
    [_, busy] = email_records()
    assert busy["scheduled_count"] == 1 and busy["severity"] == "INFO"


def test_status_target_answers_json(app_client, db):
    make_verifications(db, 1)
    client = app_client("status")
    response = client.get("/")
    assert response.status_code == 200 and response.headers["Cache-Control"] == "no-store"
    body = response.get_json()
    assert body["deployment"] == "test" and body["channels"]["email"]["ready_count"] == 1
    assert body["thresholds"]["ready_age_alert_seconds"] == 120
    assert "example.com" not in response.get_data(as_text=True)
    assert client.post("/").status_code == 405


def test_delivery_reports_signals_awaiting_and_latency(db):
    """Accepted-but-not-delivered count and age per channel, and accepted->delivered p50/p95."""
    from signup_verification.delivery import reports
    from support.reports import accepted

    sent = accepted(db, 3, prefix="sig")
    db.run("UPDATE delivery_intents SET completed_at = now() - interval '30 minutes'")
    for s, seconds in zip(sent[:2], (10, 30), strict=True):
        event = reports.Observation(dedup_key=f"d-{s['intent_id']}", event="delivered", intent_id=s["intent_id"],
                                    attempt_id=s["attempt_id"])  # fmt: skip
        reports.ingest(db, "sendgrid", [event], None)
        db.run("UPDATE delivery_intents SET delivered_at = completed_at + make_interval(secs => :s) WHERE id = :id",
               s=seconds, id=s["intent_id"])  # fmt: skip
    config = SignalsConfig(window_seconds=3600, awaiting_report_alert_seconds=900)
    email = by_channel(db, config)["email"]
    assert email.awaiting_report_count == 1 and 1790 < email.oldest_awaiting_report_seconds < 1900
    assert email.attempts["delivered"] == 2
    assert email.delivery_latency_p50_seconds == 20.0 and 28.9 < email.delivery_latency_p95_seconds <= 30.0
    from signup_verification.operations import signals

    snapshot = signals.compute(db, "test", config)
    assert any("without a delivered report" in a for a in snapshot.alerts())
    assert not any("delivered report" in a for a in signals.compute(db, "test", SignalsConfig()).alerts())
