"""The delivery worker end to end: a real PostgreSQL, real SMTP and Twilio-speaking local servers.
Every transition the dispatcher drives, and secrets kept out of records (fencing, shutdown and the
time budget: test_dispatcher_leases.py)."""

from __future__ import annotations

import json
import logging
import re

import pytest

from signup_verification.delivery.batch_sizing import LatencyEstimator
from signup_verification.delivery.channels.console import ConsoleChannel
from signup_verification.operations.dispatcher import Dispatcher, DispatchRun
from signup_verification.outbox import transitions as t
from signup_verification.platform.database import Database
from signup_verification.verifications.tokens import split_link
from support.dispatch import KEYRING, attempts, intent, provider_settings, run_dispatch
from support.factories import created
from support.fakes.http import Answer
from support.fakes.seed import seed_intents
from support.fakes.smtp import SmtpBehaviour
from support.fakes.twilio import FakeTwilio


def create(db, settings, n, channel="email", account="acct"):
    """n signups through the real create path, to <account>0@example.com, ... or +14155550000, ..."""
    return [
        created(
            db,
            f"{account}{i}@example.com" if channel == "email" else f"+1415555{i:04d}",
            account=f"{account}-{channel}-{i}",
            key=f"k-{account}-{channel}-{i}",
            config=settings.create,
        )
        for i in range(n)
    ]


# -- the happy path -------------------------------------------------------------------------------------
def test_mixed_batch_is_delivered_with_working_links_and_codes(db, smtp, twilio):
    settings = provider_settings(smtp, twilio)
    create(db, settings, 3), create(db, settings, 2, channel="sms")
    report = run_dispatch(db, settings)
    assert (report.claimed, report.accepted, report.stale_writes) == (5, 5, 0)
    assert report.batches >= 1 and report.elapsed_ms < 10_000
    # The link in each email is the one whose digest create stored: it will confirm.
    for received in smtp.received:
        text = received.message.get_body(("plain",)).get_content()
        carried = re.search(r"https://app\.example\.org/confirm\?token=([A-Za-z0-9_-]+)", text).group(1)
        vid, token = split_link(carried)  # the link names its verification
        assert db.one(
            "SELECT 1 AS ok FROM verifications WHERE id = :v AND token_digest = :d",
            v=vid,
            d=KEYRING.primary.link_digest(token),
        ) == {"ok": 1}
    for delivery in twilio.deliveries:
        code = re.search(r"code is (\d{6})", delivery.body).group(1)
        vid = db.one("SELECT id FROM verifications WHERE destination = :d", d=delivery.destination)["id"]
        assert db.one(
            "SELECT 1 AS ok FROM verifications WHERE token_digest = :d", d=KEYRING.primary.code_digest(vid, code)
        ) == {"ok": 1}
    rows = db.rows("SELECT status, attempts, provider_ref, lease_owner FROM delivery_intents ORDER BY id")
    assert all(
        r["status"] == "accepted" and r["attempts"] == 1 and r["provider_ref"] and r["lease_owner"] is None
        for r in rows
    )
    assert attempts(db, 1) == [("1:1", "attempting", None), ("1:1", "accepted", None)]
    segments = db.run("SELECT segments FROM delivery_attempts WHERE channel = 'sms' AND outcome = 'accepted'")
    assert segments == [[1], [1]]


def test_claim_records_last_claim_at_and_the_latency_that_seeds_the_next_run(db, tmp_path):
    seed_intents(db, 3)
    settings = provider_settings(local_dir=tmp_path)
    before = db.one("SELECT now() AS now")["now"]
    run_dispatch(db, settings)
    beat = db.one("SELECT * FROM worker_heartbeats WHERE name = 'dispatch:test'")
    assert beat["deployment"] == "test" and beat["last_claim_at"] >= before
    assert "email" in beat["watermark"]["send_latency_seconds"]
    db.run("UPDATE worker_heartbeats SET watermark = watermark || '{\"other\": 1}'::jsonb")
    seed_intents(db, 1, prefix="again")
    estimator = LatencyEstimator()
    Dispatcher(
        DispatchRun(db, settings.dispatch, KEYRING, {"email": ConsoleChannel("email", tmp_path)}), estimator=estimator
    ).run()
    assert estimator.snapshot()["email"] < 0.5  # seeded from the row, not the cautious default
    assert db.one("SELECT watermark FROM worker_heartbeats")["watermark"]["other"] == 1  # merged, not overwritten


def test_the_fault_hook_is_called_at_each_crash_point_with_that_state_committed(db, smtp):
    """What the crash tests and the chaos run kill at (tools/fault_dispatch.py fills the hook)."""
    seed_intents(db, 2)
    seen = []

    def hook(point: str) -> None:
        rows = db.run("SELECT status, sending_at IS NOT NULL FROM delivery_intents")
        begun = db.run("SELECT count(*) FROM delivery_attempts WHERE outcome = 'attempting'")[0][0]
        seen.append((point, sorted({(r[0], r[1]) for r in rows}), begun))

    report = run_dispatch(db, provider_settings(smtp), fault=hook)
    assert report.accepted == 2
    # The fused claim begins the attempts (rows written, sends not started); start marks them sending.
    assert seen == [
        ("after_claim", [("attempting", False)], 2),
        ("after_begin", [("attempting", True)], 2),
        ("after_send", [("attempting", True)], 2),
    ]


def test_an_empty_queue_claims_nothing(db, tmp_path):
    report = run_dispatch(db, provider_settings(local_dir=tmp_path))
    assert report.as_dict() | {"elapsed_ms": 0} == dict.fromkeys(report.as_dict(), 0)


# -- outcomes ------------------------------------------------------------------------------------------
def test_one_malformed_destination_does_not_disturb_its_batch(db, twilio):
    settings = provider_settings(twilio=twilio, send_concurrency=8)  # one batch holds all five
    ids = seed_intents(db, 5, sms_every=1)
    bad = db.one(
        "SELECT v.destination FROM verifications v JOIN delivery_intents i ON i.verification_id = v.id WHERE i.id = :id",
        id=ids[2],
    )["destination"]
    twilio.by_destination[bad] = FakeTwilio.error(400, 21211, f"The 'To' number {bad} is not a valid phone number.")
    report = run_dispatch(db, settings)
    assert (report.batches, report.accepted, report.failed) == (1, 4, 1)
    row = intent(db, ids[2])
    assert row["status"] == "failed" and row["last_error"].startswith("invalid_destination")
    assert bad not in row["last_error"] and bad[1:] not in row["last_error"]
    assert [intent(db, i)["status"] for i in ids] == ["accepted", "accepted", "failed", "accepted", "accepted"]


def test_transient_refusal_backs_off_with_jitter(db, smtp):
    smtp.behaviour = SmtpBehaviour(data_reply="451 4.3.0 try again later")
    [iid] = seed_intents(db, 1)
    report = run_dispatch(db, provider_settings(smtp))
    assert report.retryable == 1
    row = db.one("SELECT status, attempts, extract(epoch FROM next_attempt_at - now()) AS wait FROM delivery_intents")
    assert row["status"] == "retryable" and row["attempts"] == 1 and 53 <= row["wait"] <= 66  # 60 s +-10 %
    assert attempts(db, iid)[-1] == (f"{iid}:1", "retryable", "smtp_transient")
    assert t.claim(db, "someone", 10, 30) == []  # not eligible while backing off


def test_retry_after_is_honoured(db, twilio):
    twilio.script(FakeTwilio.error(429, 20429, "Too Many Requests", headers={"Retry-After": "240"}))
    seed_intents(db, 1, sms_every=1)
    run_dispatch(db, provider_settings(twilio=twilio))
    wait = db.one("SELECT extract(epoch FROM next_attempt_at - now()) AS w FROM delivery_intents")["w"]
    assert 235 <= wait <= 241


def test_transient_failure_on_the_last_attempt_fails(db, smtp):
    smtp.behaviour = SmtpBehaviour(rcpt_reply=lambda a: "450 4.2.1 busy")
    seed_intents(db, 1, max_attempts=1)
    report = run_dispatch(db, provider_settings(smtp))
    assert (report.retryable, report.failed) == (0, 1)
    row = intent(db, 1)
    assert row["status"] == "failed" and row["last_error"].startswith("attempts_exhausted") and row["completed_at"]


def test_ambiguous_email_is_held_then_retried_with_the_same_message_id(db, smtp):
    smtp.behaviour = SmtpBehaviour(drop_after_data=True)
    seed_intents(db, 1)
    settings = provider_settings(smtp)
    report = run_dispatch(db, settings)
    assert report.ambiguous == 1 and len(smtp.received) == 1  # never an immediate resend
    row = db.one(
        "SELECT status, ambiguous_count, extract(epoch FROM next_attempt_at - now()) AS hold FROM delivery_intents"
    )
    assert row["status"] == "ambiguous" and row["ambiguous_count"] == 1 and 295 <= row["hold"] <= 301
    # After the hold, the email policy retries; the duplicate carries the same Message-ID.
    db.run("UPDATE delivery_intents SET next_attempt_at = now()")
    assert t.resolve_ambiguous(db, settings.retry, 10) == [(1, "email", "retryable")]
    smtp.behaviour = SmtpBehaviour()
    assert run_dispatch(db, settings).accepted == 1
    first, second = (m.message["Message-ID"] for m in smtp.received)
    assert first == second and intent(db, 1)["attempts"] == 2


def test_ambiguous_sms_is_held_for_the_operator(db, twilio):
    twilio.script(FakeTwilio.error(500, 20500, "Internal Server Error"))
    seed_intents(db, 1, sms_every=1)
    settings = provider_settings(twilio=twilio)
    assert run_dispatch(db, settings).ambiguous == 1
    db.run("UPDATE delivery_intents SET next_attempt_at = now()")
    assert t.resolve_ambiguous(db, settings.retry, 10) == []  # sms policy: hold
    assert run_dispatch(db, settings).claimed == 0 and twilio.requests == 1


def test_oscillating_intent_is_flagged(db, smtp, caplog):
    smtp.behaviour = SmtpBehaviour(drop_after_data=True)
    seed_intents(db, 1)
    db.run("UPDATE delivery_intents SET ambiguous_count = 1, attempts = 1, status = 'retryable'")
    with caplog.at_level(logging.WARNING, logger="signup_verification.operations.dispatcher"):
        run_dispatch(db, provider_settings(smtp))
    [flagged] = [r for r in caplog.records if getattr(r, "json_fields", {}).get("flag") == "ambiguous_oscillation"]
    assert flagged.json_fields["ambiguous_count"] == 2 and intent(db, 1)["ambiguous_count"] == 2


def test_bad_credentials_fail_loudly_and_stop_hammering_the_provider(db, twilio, caplog):
    settings = provider_settings(twilio=twilio, twilio_auth_token="wrong", send_concurrency=1)
    seed_intents(db, 4, sms_every=1)
    with caplog.at_level(logging.ERROR, logger="signup_verification.operations.dispatcher"):
        report = run_dispatch(db, settings)
    assert (report.failed, report.retryable) == (1, 3) and twilio.requests == 1
    [alert] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert alert.json_fields["error_class"] == "configuration" and alert.json_fields["alert"] == "channel_configuration"
    statuses = db.run("SELECT status, last_error FROM delivery_intents ORDER BY id")
    assert statuses[0][0] == "failed" and "20003" in statuses[0][1]
    assert all(s == "retryable" and e.startswith("channel_stopped: not attempted") for s, e in statuses[1:])


def test_render_failure_affects_only_its_intent(db, tmp_path):
    seed_intents(db, 3)
    db.run(
        "UPDATE verifications SET key_id = 'retired-key' WHERE id = (SELECT verification_id FROM delivery_intents WHERE id = 2)"
    )
    report = run_dispatch(db, provider_settings(local_dir=tmp_path))
    assert (report.accepted, report.failed) == (2, 1)
    assert intent(db, 2)["last_error"].startswith("configuration: token key 'retired-key'")


# -- never a dead link ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "death,reason",
    [
        (
            "UPDATE verifications SET expires_at = now() - interval '1 second', created_at = now() - interval '1 hour'",
            "expired",
        ),
        (
            "UPDATE verifications SET expires_at = now() + interval '1 second'",
            "expired",
        ),  # dies before a send could land
        ("UPDATE verifications SET status = 'verified', verified_at = now()", "verified"),
        ("UPDATE verifications SET status = 'locked'", "locked"),
        ("UPDATE verifications SET destination = NULL, redacted_at = now()", "redacted"),
    ],
)
def test_dead_links_are_suppressed_not_sent(db, smtp, death, reason):
    seed_intents(db, 2)
    db.run(death + " WHERE id = (SELECT verification_id FROM delivery_intents WHERE id = 1)")
    report = run_dispatch(db, provider_settings(smtp))
    assert (report.claimed, report.suppressed, report.accepted) == (2, 1, 1)
    row = intent(db, 1)
    assert (row["status"], row["suppression_reason"], row["attempts"]) == ("suppressed", reason, 0)
    assert smtp.recipients() == ["seed-user2@example.com"] and attempts(db, 1) == []


def test_a_retry_that_could_only_deliver_an_expired_link_is_not_attempted(db, smtp):
    seed_intents(db, 1)
    db.run("UPDATE delivery_intents SET status = 'retryable', attempts = 2")
    db.run("UPDATE verifications SET expires_at = now(), created_at = now() - interval '1 hour'")
    assert run_dispatch(db, provider_settings(smtp)).suppressed == 1 and smtp.received == []


def test_superseded_verification_is_suppressed_at_create_and_never_claimed(db, smtp):
    settings = provider_settings(smtp)
    create(db, settings, 1, account="same")
    created(db, "new@example.com", account="same-email-0", key="second", config=settings.create)
    report = run_dispatch(db, settings)
    assert (report.claimed, report.accepted) == (1, 1) and smtp.recipients() == ["new@example.com"]


class CountingDatabase(Database):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.statements: list[str] = []

    def run(self, sql, **params):
        self.statements.append(sql)
        return super().run(sql, **params)


@pytest.mark.parametrize("batch", [10, 250])
def test_statements_per_batch_do_not_grow_with_the_batch(database_url, tmp_path, batch):
    db = CountingDatabase.from_url(database_url)
    seed_intents(db, batch * 3, sms_every=5)
    db.statements.clear()
    settings = provider_settings(local_dir=tmp_path, dispatch_max_batch=batch)
    estimator = LatencyEstimator()
    estimator.seed({"email": 0.0, "sms": 0.0})
    report = run_dispatch(db, settings, estimator=estimator)
    assert (report.batches, report.accepted) == (3, batch * 3)
    # read latency + per batch (claim, begin, settle) + one heartbeat (at most one per HEARTBEAT_SECONDS)
    # + the final empty claim + save latency
    assert len(db.statements) == 1 + 3 * 3 + 1 + 1 + 1, [s.strip().splitlines()[0][:60] for s in db.statements]
    db.close()


# -- secrets ---------------------------------------------------------------------------------------------------
def test_tokens_and_codes_never_reach_logs_or_records(db, smtp, twilio, caplog):
    settings = provider_settings(smtp, twilio)
    create(db, settings, 4)
    create(db, settings, 4, channel="sms")
    smtp.behaviour = SmtpBehaviour(
        rcpt_reply=lambda a: f"550 5.1.1 <{a}> unknown, token={a}" if a.startswith("acct1") else None
    )
    twilio.by_destination["+14155550001"] = FakeTwilio.error(400, 21211, "The 'To' number +14155550001 is not valid")
    twilio.by_destination["+14155550002"] = Answer(reset=True)
    twilio.by_destination["+14155550003"] = FakeTwilio.error(500, 20500, "oops")
    with caplog.at_level(logging.DEBUG):
        report = run_dispatch(db, settings)
    assert (report.accepted, report.failed, report.ambiguous) == (4, 2, 2)
    secrets, destinations = [], []
    for row in db.rows("SELECT id, channel, destination, token_nonce FROM verifications"):
        key = KEYRING.primary
        secrets.append(
            key.link_token(row["id"], row["token_nonce"])
            if row["channel"] == "email"
            else key.sms_code(row["id"], row["token_nonce"], 6)
        )
        destinations.append(row["destination"])
    ours = [r for r in caplog.records if r.name != "mail.log"]  # aiosmtpd's own log is the receiving side
    assert any(r.name.startswith("signup_verification") for r in ours)
    logged = "\n".join(r.getMessage() for r in ours) + json.dumps(
        [getattr(r, "json_fields", None) for r in ours], default=str
    )
    stored = json.dumps(
        db.run("SELECT a.error_detail, a.provider_ref, a.error_class FROM delivery_attempts a")
        + db.run("SELECT last_error, provider_ref FROM delivery_intents"),
        default=str,
    )
    for secret in secrets:
        assert secret not in logged and secret not in stored
    for destination in destinations:
        assert destination not in stored and destination not in logged


# -- the HTTP target --------------------------------------------------------------------------------------------
def test_dispatch_target_answers_its_report(app_client, service_env, db, tmp_path):
    seed_intents(db, 2)
    client = app_client("dispatch")
    answer = client.post("/")
    assert answer.status_code == 200
    body = answer.get_json()
    assert set(body) == {
        "claimed",
        "accepted",
        "retryable",
        "failed",
        "undeliverable",
        "ambiguous",
        "suppressed",
        "released",
        "stale_writes",
        "batches",
        "elapsed_ms",
    }
    assert (body["claimed"], body["accepted"]) == (2, 2)
    outbox = tmp_path / "local" / "outbox"
    assert sorted(p.name for p in outbox.iterdir()) == ["1-1.eml", "2-1.eml"]
    assert client.get("/").status_code == 405
