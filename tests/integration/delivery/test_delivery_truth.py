"""What the service asserts to the site must be true, end to end on a real PostgreSQL with the
providers' protocols: which secret proved a verification, what failed for good and why, and a
suppression that blocks only the address that bounced."""

from __future__ import annotations

import json
import logging
import uuid

import pytest

from signup_verification.api.problems import Problem
from signup_verification.delivery import reports
from signup_verification.delivery.classification import sendgrid as sendgrid_table
from signup_verification.operations import channel_holds, signals, timeline
from signup_verification.verifications import confirm as c
from signup_verification.verifications import read
from support.dispatch import KEYRING, provider_settings, run_dispatch
from support.factories import create
from support.policy import create_with_fallback, intents, sent
from support.reports import sendgrid_event, twilio_form


def secrets(db, vid: uuid.UUID) -> tuple[str, str]:
    """The link and the code the verification's messages carry (derived as the dispatcher does)."""
    row = db.one("SELECT key_id, token_nonce FROM verifications WHERE id = :v", v=vid)
    key = KEYRING.get(row["key_id"])
    return key.link(vid, bytes(row["token_nonce"])), key.sms_code(vid, bytes(row["token_nonce"]), 6)


def verified_event(db, vid: uuid.UUID) -> dict:
    [[payload]] = db.run(
        "SELECT payload FROM delivery_intents WHERE verification_id = :v AND event_type = 'verification.verified'",
        v=vid,
    )
    return payload


@pytest.mark.parametrize("after_seconds", [30, 0], ids=["policy-fallback", "policy-both"])
@pytest.mark.parametrize("first", ["code", "link"])
def test_each_secret_proves_its_own_destination_and_the_first_verified_it(db, after_seconds, first):
    settings = provider_settings()
    db.run("SET signup_verification.webhooks = 'on'")
    vid = create_with_fallback(db, settings.create, channel="email", after_seconds=after_seconds)
    sent(db, vid, "sms")  # the code is known only once its SMS was sent
    link, code = secrets(db, vid)
    if first == "code":
        assert c.confirm_code(db, KEYRING, vid, code).result == c.VERIFIED
        assert c.preview_link(db, KEYRING, link).result == c.PENDING  # the address is not proved: the page asks
        assert c.confirm_link(db, KEYRING, link).result == c.VERIFIED  # and now it is
        assert c.confirm_link(db, KEYRING, link).result == c.ALREADY_VERIFIED
        proof, order = ("sms", "code"), ["sms", "email"]
    else:
        assert c.confirm_link(db, KEYRING, link).result == c.VERIFIED
        assert c.confirm_code(db, KEYRING, vid, code).result == c.VERIFIED
        assert c.confirm_code(db, KEYRING, vid, code).result == c.ALREADY_VERIFIED
        proof, order = ("email", "link"), ["email", "sms"]
    view = read.read(db, KEYRING, settings.create.link_base, vid)
    assert view is not None
    assert (view.channel, view.verified_channel, view.verified_via) == ("email", *proof)  # the first proof
    assert [p.channel for p in view.proofs] == order
    assert {p.channel: p.destination for p in view.proofs} == {"email": "a***@example.com", "sms": "+1******0100"}
    event = verified_event(db, vid)
    assert (event["channel"], event["verified_channel"], event["verified_via"]) == ("email", *proof)
    inspected = timeline.timeline(db, vid)
    as_json = json.loads(json.dumps(inspected.as_json()))
    assert (as_json["verification"]["verified_channel"], as_json["verification"]["verified_via"]) == proof
    assert [p["channel"] for p in as_json["verification"]["proofs"]] == order
    rendered = timeline.render(inspected)
    assert f"proved by {proof[0]} ({proof[1]}) " in rendered and ": primary channel email" in rendered
    assert f"also proved by {order[1]}" in rendered
    assert ("confirmed with the SMS code" if first == "code" else "confirmed with the email's link") in rendered


def test_an_sms_unreachable_handset_brings_the_email_fallback_forward_and_suppresses_nothing(db, smtp, twilio):
    """Twilio `undelivered` 30003: final for that message, not the number's fault. The email fallback
    goes out at the next dispatch instead of waiting its delay; the number stays creatable."""
    settings = provider_settings(smtp, twilio)
    vid = create_with_fallback(db, settings.create, channel="sms", after_seconds=300)
    assert run_dispatch(db, settings).accepted == 1 and not smtp.received  # the email is not due
    sms = intents(db, vid)["primary"]
    observation = reports.twilio_observation(twilio_form(sms["provider_ref"], "undelivered", ErrorCode="30003"))
    result = reports.ingest(db, "twilio", [observation])
    assert (result.undeliverable, result.suppressed) == (1, 0)
    assert run_dispatch(db, settings).accepted == 1
    assert [m.rcpt_tos for m in smtp.received] == [["ada@example.com"]]
    view = read.read(db, KEYRING, settings.create.link_base, vid)
    assert view is not None
    primary = next(d for d in view.deliveries if d.role == "primary")
    assert (primary.status, primary.last_outcome) == ("undeliverable", "accepted") and primary.accepted_at
    assert primary.reason == {"category": "unreachable", "code": "30003", "provider": "twilio",
                              "fault": "transient_or_unknown"}  # fmt: skip
    assert db.one("SELECT count(*) AS n FROM destination_suppressions")["n"] == 0
    assert create(db, "+14155550100", account="acct-again", key="again", config=settings.create).status == 201


def test_a_sendgrid_quota_drop_suppresses_nobody_and_alerts(db, caplog, app_client, monkeypatch):
    from support.factories import deliver
    from support.reports import post_sendgrid, reports_env

    for name, value in reports_env().items():
        monkeypatch.setenv(name, value)
    client = app_client("delivery_reports")
    settings = provider_settings()
    request = dict(destination="quota@example.com", account="acct-q")
    create(db, **request, key="q1", config=settings.create)
    [intent_id] = deliver(db)
    drop = sendgrid_event(intent_id, f"{intent_id}:1", "dropped", reason="Recipient List over Package Quota")
    with caplog.at_level(logging.ERROR, logger="signup_verification.api.delivery_reports"):
        answer = post_sendgrid(client, [drop]).get_json()
    assert (answer["undeliverable"], answer["suppressed"], answer["sender_faults"]) == (1, 0, 1)
    assert any(getattr(r, "json_fields", {}).get("alert") == "sender_or_account" for r in caplog.records)
    alerts = signals.compute(db, "test").alerts()
    assert any("email: 1 fault(s) of our account (quota_exceeded sendgrid over_quota)" in a for a in alerts)
    assert db.one("SELECT count(*) AS n FROM destination_suppressions")["n"] == 0
    assert create(db, **request, key="q2", config=settings.create).status == 201


def test_a_run_of_sender_faults_holds_the_channel_until_resumed(db, smtp):
    settings = provider_settings(smtp)
    for n in range(4):
        create(db, f"h{n}@example.com", account=f"acct-h{n}", key=f"h{n}", config=settings.create)
    from support.factories import deliver

    delivered = deliver(db, limit=3)
    drops = [
        reports.Observation.classified(
            sendgrid_table.event_verdict("dropped", drop_reason="Recipient List over Package Quota"),
            dedup_key=f"q-{i}", event="dropped", intent_id=i, attempt_id=f"{i}:1",
        )
        for i in delivered
    ]  # fmt: skip
    assert reports.ingest(db, "sendgrid", drops).held == 1  # the third fault of the run holds email
    status = signals.compute(db, "test")
    assert status.channel("email").held
    assert any(
        "email: held (scope account) after 3 fault(s)" in a and "verifyctl channel resume email" in a
        for a in status.alerts()
    )
    assert run_dispatch(db, settings).claimed == 0 and not smtp.received  # the fourth waits: not failed
    assert (
        intents(db, db.one("SELECT id FROM verifications WHERE account_id = 'acct-h3'")["id"])["primary"]["status"]
        == "ready"
    )
    assert channel_holds.resume(db, "email", "test") is True
    assert run_dispatch(db, settings).accepted == 1 and len(smtp.received) == 1
    assert not signals.compute(db, "test").channel("email").held


def test_an_alias_bounce_blocks_only_the_exact_address(db):
    from support.factories import deliver

    settings = provider_settings()

    def signup(destination: str, key: str):
        return create(db, destination, key=key, config=settings.create)

    signup("victim+x@gmail.com", "alias")
    [intent_id] = deliver(db)
    bounce = reports.sendgrid_events(
        json.dumps([sendgrid_event(intent_id, f"{intent_id}:1", "bounce", type="bounce", status="5.1.1")]).encode()
    )
    assert reports.ingest(db, "sendgrid", bounce.observations).suppressed == 1
    assert signup("victim@gmail.com", "victim").status == 201
    assert signup("v.i.c.t.i.m@googlemail.com", "dots").status == 201
    with pytest.raises(Problem) as refused:
        signup("victim+x@gmail.com", "again")
    assert refused.value.slug == "destination-suppressed"


def test_a_spam_report_suppresses_the_address_though_it_was_delivered(db):
    from support.factories import deliver

    settings = provider_settings()
    request = dict(destination="annoyed@example.com", account="acct-spam")
    create(db, **request, key="spam-1", config=settings.create)
    [intent_id] = deliver(db)
    events = [sendgrid_event(intent_id, f"{intent_id}:1"), sendgrid_event(intent_id, f"{intent_id}:1", "spamreport")]
    batch = reports.sendgrid_events(json.dumps(events).encode())
    result = reports.ingest(db, "sendgrid", batch.observations)
    assert (result.delivered, result.undeliverable, result.suppressed) == (1, 0, 1)
    with pytest.raises(Problem) as refused:
        create(db, **request, key="spam-2", config=settings.create)
    assert refused.value.slug == "destination-suppressed"


def test_opt_in_delivery_events_one_per_delivery_and_type(db):
    """WEBHOOK_EVENTS=all: delivery.delivered and delivery.bounced, one per delivery (its channel is
    the event's subject, so each has its own webhook-id), recorded with the report."""
    from signup_verification.delivery.events import webhook_id
    from signup_verification.outbox import transitions as t
    from signup_verification.outbox.transitions import Settlement

    db.run("SET signup_verification.webhooks = 'on'")
    db.run("SET signup_verification.webhook_events = 'delivery.delivered,delivery.bounced,delivery.failed'")
    vid = create_with_fallback(db, provider_settings().create, channel="email", after_seconds=0)
    claimed = t.claim(db, "w", 10, 30)
    begun = t.begin_attempts(db, "w", [i.fence for i in claimed])
    refs = {i.id: f"ref-{i.id}" if i.channel == "email" else "SM" + uuid.uuid4().hex for i in claimed}
    t.settle(db, "w", [Settlement(i.id, i.lease_version, "accepted", provider_ref=refs[i.id]) for i in claimed])
    email = next(i for i in claimed if i.channel == "email")
    sms = next(i for i in claimed if i.channel == "sms")
    attempt = {b.intent_id: b.attempt_id for b in begun}
    for _ in range(2):  # a repeated report records nothing more
        reports.ingest(db, "sendgrid", reports.sendgrid_events(
            json.dumps([sendgrid_event(email.id, attempt[email.id])]).encode()).observations)  # fmt: skip
        reports.ingest(db, "twilio", [reports.twilio_observation(twilio_form(refs[sms.id], "delivered"))])
    rows = db.rows(
        "SELECT event_type, event_subject, payload FROM delivery_intents WHERE verification_id = :v AND role = 'event'"
        " ORDER BY event_subject",
        v=vid,
    )
    assert [(r["event_type"], r["event_subject"]) for r in rows] == [
        ("delivery.delivered", "email"), ("delivery.delivered", "sms")]  # fmt: skip
    assert rows[0]["payload"]["delivery"]["status"] == "delivered" and rows[0]["payload"]["delivery"]["delivered_at"]
    assert [(r["payload"]["delivery"]["step"], r["payload"]["delivery"]["role"]) for r in rows] == [
        (1, "primary"), (2, "fallback")]  # fmt: skip
    assert webhook_id(vid, "delivery.delivered", "email") != webhook_id(vid, "delivery.delivered", "sms")
    assert not db.rows("SELECT 1 FROM delivery_intents WHERE verification_id = :v AND event_type = 'delivery.bounced'",
                       v=vid)  # fmt: skip


def test_a_bounce_records_delivery_bounced_with_its_reason_only_when_asked(db):
    from support.factories import deliver

    db.run("SET signup_verification.webhooks = 'on'")
    settings = provider_settings()
    answer = create(db, "gone@example.com", account="acct-b", key="b1", config=settings.create)
    vid = uuid.UUID(answer.body["verification_id"])
    [intent_id] = deliver(db)
    bounce = sendgrid_event(intent_id, f"{intent_id}:1", "bounce", type="bounce", status="5.1.1")
    db.run("SET signup_verification.webhook_events = 'delivery.bounced,delivery.failed'")
    reports.ingest(db, "sendgrid", reports.sendgrid_events(json.dumps([bounce]).encode()).observations)
    rows = {r["event_type"]: r["payload"] for r in db.rows(
        "SELECT event_type, payload FROM delivery_intents WHERE verification_id = :v AND role = 'event'", v=vid)}  # fmt: skip
    reason = {"category": "bounced", "code": "5.1.1", "provider": "sendgrid", "fault": "recipient"}
    assert rows["delivery.bounced"]["delivery"]["reason"] == reason
    assert rows["delivery.failed"]["deliveries"] == [
        {"step": 1, "channel": "email", "role": "primary", "status": "undeliverable",
         "failed_at": rows["delivery.failed"]["deliveries"][0]["failed_at"], "reason": reason}]  # fmt: skip
    assert rows["delivery.failed"]["failed_channels"] == ["email"]
