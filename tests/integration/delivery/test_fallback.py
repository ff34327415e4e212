"""The channel policy through the real worker: a real PostgreSQL, SMTP and Twilio-speaking
local servers. The fallback waits in the outbox (not in a worker timer), is brought forward in the
statement that fails the primary for good, and is suppressed by the dead-link rule when the
verification was confirmed first."""

from __future__ import annotations

from signup_verification.operations import signals
from signup_verification.operations.reconciler import redact
from signup_verification.outbox import transitions as t
from signup_verification.outbox.config import RetryPolicy
from signup_verification.outbox.transitions import Settlement
from signup_verification.platform.catalogue import catalogue
from signup_verification.verifications import confirm as c
from support.dispatch import KEYRING, provider_settings, run_dispatch
from support.fakes.smtp import SmtpBehaviour
from support.fakes.twilio import FakeTwilio
from support.policy import code_in, create_with_fallback, intents, token_in


def make_due(db, vid) -> None:
    """'Wait after_seconds' without waiting: the fallback's schedule moves into the past."""
    db.run(
        "UPDATE delivery_intents SET next_attempt_at = now() - interval '1 second'"
        " WHERE verification_id = :v AND role = 'fallback'",
        v=vid,
    )


def test_unconfirmed_the_sms_goes_out_when_due_and_its_code_verifies(db, smtp, twilio):
    settings = provider_settings(smtp, twilio)
    vid = create_with_fallback(db, settings.create, after_seconds=30)
    report = run_dispatch(db, settings)
    assert (report.claimed, report.accepted) == (1, 1) and not twilio.deliveries  # not due yet
    assert signals.compute(db, "test").channel("sms").oldest_ready_verification_seconds == 0  # never ages
    make_due(db, vid)
    assert run_dispatch(db, settings).accepted == 1
    [sms] = twilio.deliveries
    assert sms.destination == "+14155550100"
    assert c.confirm_code(db, KEYRING, vid, code_in(sms.body)).result == c.VERIFIED
    assert signals.compute(db, "test").channel("sms").later_steps["2"]["timer"] == 1


def test_confirmed_by_email_first_the_sms_is_never_sent(db, smtp, twilio):
    settings = provider_settings(smtp, twilio)
    vid = create_with_fallback(db, settings.create, after_seconds=30)
    run_dispatch(db, settings)
    text = smtp.received[0].message.get_body(("plain",)).get_content()
    assert c.confirm_link(db, KEYRING, token_in(text)).result == c.VERIFIED
    make_due(db, vid)  # its time comes
    assert run_dispatch(db, settings).claimed == 0
    assert not twilio.deliveries
    fallback = intents(db, vid)["fallback"]
    assert (fallback["status"], fallback["suppression_reason"], fallback["attempts"]) == ("suppressed", "verified", 0)
    assert signals.compute(db, "test").channel("sms").later_steps == {
        "2": {"timer": 0, "brought_forward": 0, "at_once": 0, "suppressed": 1},
        "3": {"timer": 0, "brought_forward": 0, "at_once": 0, "suppressed": 0},
    }


def test_an_email_refused_permanently_brings_the_sms_forward_at_once(db, smtp, twilio):
    settings = provider_settings(smtp, twilio)
    smtp.behaviour = SmtpBehaviour(rcpt_reply=lambda a: "550 5.1.1 <ada@example.com> no such user")
    vid = create_with_fallback(db, settings.create, after_seconds=300)
    run_dispatch(db, settings)  # the email fails for good; the same run (or the next) sends the SMS
    rows = intents(db, vid)
    assert rows["primary"]["status"] == "failed"
    assert rows["fallback"]["brought_forward_at"] is not None
    if not twilio.deliveries:
        run_dispatch(db, settings)
    [sms] = twilio.deliveries
    assert intents(db, vid)["fallback"]["status"] == "accepted"
    assert c.confirm_code(db, KEYRING, vid, code_in(sms.body)).result == c.VERIFIED
    assert signals.compute(db, "test").channel("sms").later_steps["2"]["brought_forward"] == 1


def test_after_seconds_zero_sends_both_at_once(db, smtp, twilio):
    settings = provider_settings(smtp, twilio)
    vid = create_with_fallback(db, settings.create, after_seconds=0)
    assert run_dispatch(db, settings).accepted == 2
    assert len(smtp.received) == 1 and len(twilio.deliveries) == 1
    assert signals.compute(db, "test").channel("sms").later_steps["2"]["at_once"] == 1
    assert {r["status"] for r in intents(db, vid).values()} == {"accepted"}


def test_an_sms_first_verification_falls_back_to_the_email_link(db, smtp, twilio):
    settings = provider_settings(smtp, twilio)
    twilio.by_destination["+14155550100"] = FakeTwilio.error(400, 21211, "The 'To' number is not valid")
    vid = create_with_fallback(db, settings.create, channel="sms", after_seconds=300)
    run_dispatch(db, settings)
    if not smtp.received:
        run_dispatch(db, settings)
    assert intents(db, vid)["primary"]["status"] == "failed"
    [mail] = smtp.received
    assert mail.rcpt_tos == ["ada@example.com"]
    text = mail.message.get_body(("plain",)).get_content()
    assert c.confirm_link(db, KEYRING, token_in(text)).result == c.VERIFIED


# -- the hook, at the outbox level --------------------------------------------------------------------
def _fail_primary(db, vid, outcome: str) -> None:
    [claimed] = t.claim(db, "w", 10, 30)
    assert claimed.verification_id == vid
    t.begin_attempts(db, "w", [claimed.fence])
    t.settle(db, "w", [Settlement(claimed.id, claimed.lease_version, outcome, 0, "x", "y")])


def test_attempts_exhausted_brings_the_fallback_forward_in_the_same_statement(db):
    settings = provider_settings()
    vid = create_with_fallback(db, settings.create, after_seconds=300)
    db.run("UPDATE delivery_intents SET max_attempts = 1 WHERE role = 'primary'")
    _fail_primary(db, vid, "retryable")
    rows = intents(db, vid)
    assert rows["primary"]["status"] == "failed" and rows["primary"]["last_error"].startswith("attempts_exhausted")
    assert rows["fallback"]["brought_forward_at"] is not None
    [fallback] = t.claim(db, "w", 10, 30)
    assert (fallback.channel, fallback.destination) == ("sms", "+14155550100")


def test_an_ambiguous_primary_given_up_brings_the_fallback_forward(db):
    settings = provider_settings()
    vid = create_with_fallback(db, settings.create, after_seconds=300)
    _fail_primary(db, vid, "ambiguous")
    db.run("UPDATE delivery_intents SET max_attempts = attempts WHERE role = 'primary'")
    assert [r[2] for r in t.resolve_ambiguous(db, RetryPolicy(), 10)] == ["failed"]
    assert intents(db, vid)["fallback"]["brought_forward_at"] is not None


def test_a_retryable_primary_does_not_bring_it_forward(db):
    settings = provider_settings()
    vid = create_with_fallback(db, settings.create, after_seconds=300)
    _fail_primary(db, vid, "retryable")
    fallback = intents(db, vid)["fallback"]
    assert fallback["brought_forward_at"] is None and fallback["due_after"] > 299


def test_the_reconciler_suppresses_an_expired_verifications_fallback_saying_why(db):
    settings = provider_settings()
    vid = create_with_fallback(db, settings.create, after_seconds=300)
    db.run("UPDATE verifications SET created_at = now() - interval '1 hour', expires_at = now() - interval '1 s'")
    ids = {row["id"] for row in intents(db, vid).values()}
    assert sorted(t.sweep_dead(db, 100).suppressed) == sorted(
        ("expired", i) for i in ids
    )  # the dead-link rule, once each
    fallback = intents(db, vid)["fallback"]
    assert (fallback["status"], fallback["suppression_reason"]) == ("suppressed", "expired")


def test_redaction_clears_the_fallback_destination_too(db, smtp, twilio):
    settings = provider_settings(smtp, twilio)
    vid = create_with_fallback(db, settings.create, after_seconds=0)
    run_dispatch(db, settings)
    db.run(
        "UPDATE verifications SET status = 'expired', created_at = now() - interval '40 days',"
        " expires_at = now() - interval '39 days'"
    )
    db.run("UPDATE delivery_intents SET last_error = 'rejected +14155550100' WHERE role = 'fallback'")
    [[_, scrubbed]] = redact.in_retention_transaction(
        db, catalogue("operations")["redact"], limit=100, redact_after_seconds=86_400
    )
    assert scrubbed == 1  # the fallback's error quoted its own destination
    assert (
        db.one("SELECT last_error FROM delivery_intents WHERE role = 'fallback'")["last_error"] == "rejected [redacted]"
    )
    row = db.one("SELECT destination, redacted_at FROM verifications WHERE id = :v", v=vid)
    assert row["destination"] is None and row["redacted_at"] is not None
    assert db.run("SELECT destination FROM delivery_intents WHERE verification_id = :v", v=vid) == [[None], [None]]


def test_one_waiting_worker_sends_the_sms_when_its_time_comes_not_before(db, smtp, twilio):
    """As a user would see it: no clock moved by hand. The email at once, the SMS ~after_seconds later."""
    import time

    settings = provider_settings(
        smtp,
        twilio,
        dispatch_idle_wait=True,
        dispatch_idle_poll_seconds=0.1,
        function_timeout_seconds=7,
        dispatch_safety_margin_seconds=1,
    )
    started = time.time()
    vid = create_with_fallback(db, settings.create, after_seconds=3)
    report = run_dispatch(db, settings)
    assert report.accepted == 2 and len(smtp.received) == 1
    [sms] = twilio.deliveries
    taken_after = db.one(
        "SELECT extract(epoch FROM a.attempted_at - i.created_at)::float8 AS s FROM delivery_attempts a"
        " JOIN delivery_intents i ON i.id = a.intent_id WHERE i.role = 'fallback' AND a.outcome = 'attempting'"
    )["s"]
    assert 3.0 <= taken_after < 4.5, taken_after  # due at created_at + 3 s, sent within a poll or two
    assert time.time() - started < 10
    assert c.confirm_code(db, KEYRING, vid, code_in(sms.body)).result == c.VERIFIED


def test_verifyctl_status_shows_the_later_steps_by_step_and_reason(db, smtp, twilio):
    from signup_verification.operations import status_table

    settings = provider_settings(smtp, twilio)
    quiet = status_table.render(signals.compute(db, "test"))
    assert "later steps on" not in quiet  # nothing changes for deployments without a channel policy
    create_with_fallback(db, settings.create, after_seconds=0, account="a1", phone="+14155550101")
    confirmed = create_with_fallback(db, settings.create, account="a2", email="b@example.com", phone="+14155550102")
    run_dispatch(db, settings)
    [mail] = [m for m in smtp.received if m.rcpt_tos == ["b@example.com"]]
    text = mail.message.get_body(("plain",)).get_content()
    assert c.confirm_link(db, KEYRING, token_in(text)).result == c.VERIFIED
    assert intents(db, confirmed)["fallback"]["status"] == "suppressed"
    rendered = status_table.render(signals.compute(db, "test"))
    assert "later steps on sms (5 min): step 2 sent 1 (timer 0, brought forward 0, at once 1), suppressed 1" in rendered


def test_a_hard_bounce_reported_later_brings_the_sms_forward(db):
    """Delivery reports fail an accepted email through the same hook (delivery_failed)."""
    import json

    from signup_verification.delivery import reports as domain
    from support.factories import deliver
    from support.reports import sendgrid_event

    vid = create_with_fallback(db, provider_settings().create, after_seconds=300)
    [intent_id] = deliver(db)  # only the email: the SMS is not due
    bounce = sendgrid_event(intent_id, f"{intent_id}:1", "bounce", type="bounce", status="5.1.1", reason="550 5.1.1")
    batch = domain.sendgrid_events(json.dumps([bounce]).encode())
    assert domain.ingest(db, "sendgrid", batch.observations).undeliverable == 1
    rows = intents(db, vid)
    assert rows["primary"]["status"] == "failed" and rows["fallback"]["brought_forward_at"] is not None
    [fallback] = t.claim(db, "w", 10, 30)
    assert (fallback.channel, fallback.destination) == ("sms", "+14155550100")


def test_the_events_name_each_failed_delivery_by_its_step(db):
    """The email fails for good, then the SMS brought forward fails too: `delivery.bounced` names each
    step as it fails, and `delivery.failed` lists both steps in order."""
    db.run("SET signup_verification.webhooks = 'on'")
    db.run("SET signup_verification.webhook_events = 'delivery.bounced,delivery.failed'")
    vid = create_with_fallback(db, provider_settings().create, after_seconds=300)
    _fail_primary(db, vid, "failed")
    # the fallback, brought forward, is claimed next (with the event just recorded): it fails too
    [sms] = [i for i in t.claim(db, "w", 10, 30) if i.channel == "sms"]
    t.begin_attempts(db, "w", [sms.fence])
    t.settle(db, "w", [Settlement(sms.id, sms.lease_version, "failed", 0, "x", "y")])
    payloads = db.rows(
        "SELECT event_type, payload FROM delivery_intents WHERE verification_id = :v AND role = 'event' ORDER BY id",
        v=vid,
    )
    bounced = [p["payload"]["delivery"] for p in payloads if p["event_type"] == "delivery.bounced"]
    assert [(d["step"], d["channel"], d["role"]) for d in bounced] == [(1, "email", "primary"), (2, "sms", "fallback")]
    [failed] = [p["payload"] for p in payloads if p["event_type"] == "delivery.failed"]
    assert [(d["step"], d["channel"]) for d in failed["deliveries"]] == [(1, "email"), (2, "sms")]
