"""The delivery_reports target through the real HTTP stack on a real PostgreSQL: signed reports
become observations with their effects; unsigned, forged or stale ones change nothing."""

from __future__ import annotations

import json
import re
import time

import pytest

from support.factories import create
from support.reports import (
    SIGNING_KEY,
    TWILIO_TOKEN,
    accepted,
    post_sendgrid,
    reports_env,
    sendgrid_event,
    sendgrid_headers,
    twilio_form,
    twilio_post,
)


@pytest.fixture
def client(app_client, monkeypatch):
    for name, value in reports_env().items():
        monkeypatch.setenv(name, value)
    return app_client("delivery_reports")


def observations(db) -> list[tuple]:
    return [
        tuple(r) for r in db.run("SELECT intent_id, event, detail, permanent FROM delivery_observations ORDER BY id")
    ]


def intent(db, intent_id: int) -> dict:
    return db.one("SELECT * FROM delivery_intents WHERE id = :id", id=intent_id)


def test_delivered_event_sets_delivered_at_once_and_is_idempotent(client, db):
    [sent] = accepted(db)
    event = sendgrid_event(sent["intent_id"], sent["attempt_id"])
    first = post_sendgrid(client, [event, dict(event)])  # the batch repeats it too
    assert first.status_code == 200, first.get_data(as_text=True)
    assert first.get_json() | {} == {**first.get_json(), "received": 2, "stored": 1, "duplicates": 1, "delivered": 1}
    again = post_sendgrid(client, [event])  # SendGrid retried the batch
    assert again.get_json()["stored"] == 0 and again.get_json()["duplicates"] == 1
    assert observations(db) == [(sent["intent_id"], "delivered", None, False)]
    row = intent(db, sent["intent_id"])
    assert row["status"] == "accepted" and row["delivered_at"] is not None


def test_linked_by_sg_message_id_without_custom_args(client, db):
    [sent] = accepted(db)
    event = sendgrid_event(sent["intent_id"], sent["attempt_id"], sg_message_id=sent["ref"] + ".filter0001.1-0")
    del event["intent_id"], event["attempt_id"]
    assert post_sendgrid(client, [event]).get_json()["stored"] == 1
    assert db.run("SELECT attempt_id FROM delivery_observations")[0][0] == sent["attempt_id"]


def test_hard_bounce_fails_the_delivery_and_suppresses_the_exact_address_only(client, db):
    first = create(db, "Bouncy.Person+x@gmail.com", key="bounce-1")
    from support.factories import deliver

    [intent_id] = deliver(db)
    attempt_id = f"{intent_id}:1"
    bounce = sendgrid_event(intent_id, attempt_id, "bounce", type="bounce", status="5.1.1",
                            reason="550 5.1.1 <bouncyperson@gmail.com>: user unknown")  # fmt: skip
    answer = post_sendgrid(client, [bounce]).get_json()
    assert answer["undeliverable"] == 1 and answer["suppressed"] == 1
    row = intent(db, intent_id)
    assert row["status"] == "failed" and row["undeliverable_reason"] == "bounce bounce 5.1.1"
    assert (row["failure_category"], row["failure_code"], row["failure_fault"]) == ("bounced", "5.1.1", "recipient")
    assert "gmail" not in json.dumps([list(r) for r in db.run("SELECT * FROM delivery_observations")], default=str)
    # the exact address that bounced is refused, and nothing is kept
    with pytest.raises(Exception) as refused:
        create(db, "Bouncy.Person+x@gmail.com", key="bounce-2")
    assert refused.value.status == 422 and refused.value.slug == "destination-suppressed"
    assert db.run("SELECT count(*) FROM idempotency_keys WHERE key = 'bounce-2'")[0][0] == 0
    # another mailbox name of the same inbox is a different address: anyone can bounce an alias
    assert create(db, "bouncyperson@googlemail.com", key="bounce-3").status == 201
    assert first.status == 201
    # a later "delivered" for the same message changes nothing: the first terminal fact wins
    post_sendgrid(client, [sendgrid_event(intent_id, attempt_id)])
    assert intent(db, intent_id)["delivered_at"] is None


def test_soft_events_are_observations_only(client, db):
    [sent] = accepted(db)
    soft = [
        sendgrid_event(sent["intent_id"], sent["attempt_id"], "deferred", response="try later"),
        sendgrid_event(sent["intent_id"], sent["attempt_id"], "open"),  # engagement: not kept
    ]
    answer = post_sendgrid(client, soft).get_json()
    assert answer["stored"] == 1 and answer["ignored"] == 1 and answer["undeliverable"] == 0
    assert intent(db, sent["intent_id"])["status"] == "accepted"
    assert db.run("SELECT count(*) FROM destination_suppressions")[0][0] == 0


def test_a_block_fails_the_message_and_blames_nobody_s_address(client, db):
    """SendGrid's `bounce` of type `blocked`: the receiving server refused us; SendGrid will not retry."""
    [sent] = accepted(db)
    blocked = sendgrid_event(sent["intent_id"], sent["attempt_id"], "bounce", type="blocked", status="5.7.1")
    answer = post_sendgrid(client, [blocked]).get_json()
    assert answer["undeliverable"] == 1 and answer["suppressed"] == 0
    row = intent(db, sent["intent_id"])
    assert (row["status"], row["failure_category"], row["failure_fault"]) == ("failed", "blocked", "sender_or_account")
    assert db.run("SELECT count(*) FROM destination_suppressions")[0][0] == 0


def test_unknown_references_are_answered_200_and_not_stored(client, db):
    answer = post_sendgrid(client, [sendgrid_event(999_999, "999999:1")])
    assert answer.status_code == 200 and answer.get_json()["unknown"] == 1
    assert observations(db) == []


@pytest.mark.parametrize(
    "mutate, status",
    [
        (lambda h, b: h.pop("X-Twilio-Email-Event-Webhook-Signature"), 401),
        (lambda h, b: h.pop("X-Twilio-Email-Event-Webhook-Timestamp"), 401),
        (lambda h, b: h.update({"X-Twilio-Email-Event-Webhook-Timestamp": str(int(time.time()) - 3600)}), 403),
        (lambda h, b: h.update({"X-Twilio-Email-Event-Webhook-Signature": "MEUCIQ=="}), 403),
        (lambda h, b: h.update(sendgrid_headers(b + b" ")), 403),  # signed another body
    ],
)
def test_unsigned_forged_or_stale_batches_change_nothing(client, db, mutate, status):
    [sent] = accepted(db)
    body = json.dumps([sendgrid_event(sent["intent_id"], sent["attempt_id"])]).encode()
    headers = sendgrid_headers(body)
    mutate(headers, body)
    response = client.post("/sendgrid", data=body, headers=headers)
    assert response.status_code == status and response.mimetype == "application/problem+json"
    assert observations(db) == [] and intent(db, sent["intent_id"])["delivered_at"] is None


def test_stale_timestamp_with_a_valid_signature_is_refused(client, db):
    body = b"[]"
    old = int(time.time()) - 301
    response = client.post("/sendgrid", data=body, headers=sendgrid_headers(body, old, SIGNING_KEY))
    assert response.status_code == 403


@pytest.mark.parametrize("body", [b"{}", b"not json", b"\xff\xfe", b'"x"'])
def test_signed_but_malformed_batches_are_400(client, db, body):
    response = client.post("/sendgrid", data=body, headers=sendgrid_headers(body))
    assert response.status_code == 400 and response.mimetype == "application/problem+json"


def test_twilio_callbacks_delivered_out_of_order(client, db):
    [sent] = accepted(db, channel="sms")
    for status in ("delivered", "sent", "queued", "delivered"):
        body, headers = twilio_post(twilio_form(sent["ref"], status))
        assert client.post("/twilio", data=body, headers=headers).status_code == 200
    assert [r[1] for r in observations(db)] == ["delivered", "sent", "queued"]
    assert intent(db, sent["intent_id"])["delivered_at"] is not None


def test_twilio_undelivered_with_a_permanent_code_suppresses_the_number(client, db):
    [sent] = accepted(db, channel="sms")
    body, headers = twilio_post(twilio_form(sent["ref"], "undelivered", ErrorCode="30005"))
    assert client.post("/twilio", data=body, headers=headers).get_json()["undeliverable"] == 1
    row = intent(db, sent["intent_id"])
    assert row["status"] == "failed" and "30005" in row["undeliverable_reason"]
    assert db.run("SELECT channel FROM destination_suppressions")[0][0] == "sms"


def test_twilio_undelivered_to_an_unreachable_handset_fails_the_message_and_suppresses_nothing(client, db):
    """30003: the phone is off or out of coverage. The message will never arrive (Twilio does not
    retry it), but the number is fine: final, nobody's fault, never suppressed."""
    [sent] = accepted(db, channel="sms")
    body, headers = twilio_post(twilio_form(sent["ref"], "undelivered", ErrorCode="30003"))
    answer = client.post("/twilio", data=body, headers=headers).get_json()
    assert (answer["undeliverable"], answer["suppressed"]) == (1, 0)
    row = intent(db, sent["intent_id"])
    assert (row["status"], row["failure_category"], row["failure_code"], row["failure_fault"]) == (
        "failed", "unreachable", "30003", "transient_or_unknown")  # fmt: skip
    assert db.run("SELECT count(*) FROM destination_suppressions")[0][0] == 0


@pytest.mark.parametrize(
    "signed_url, token, status",
    [
        ("https://evil.example/delivery_reports/twilio", None, 403),  # signed for another URL (Host header trick)
        (None, "wrong-token", 403),
    ],
)
def test_twilio_forged_callbacks_change_nothing(client, db, signed_url, token, status):
    [sent] = accepted(db, channel="sms")
    kwargs = {k: v for k, v in (("url", signed_url), ("token", token)) if v}
    body, headers = twilio_post(twilio_form(sent["ref"], "delivered"), **kwargs)
    response = client.post("/twilio", data=body, headers={**headers, "Host": "evil.example"})
    assert response.status_code == status and observations(db) == []


def test_twilio_callbacks_are_accepted_exactly_as_twilios_requestvalidator_accepts_them(configured_app, db):
    """The StatusCallback configured with user-info (basic auth for the callback) and a callback
    repeating a field with one value: signed over the URL with its default port added and the value
    once, as twilio-python's RequestValidator checks it (tests/unit/test_report_signatures.py)."""
    import base64
    import hashlib
    import hmac
    from urllib.parse import urlencode

    url = "https://cb:secret@reports.example.com/delivery_reports"
    client = configured_app("delivery_reports", **{**reports_env(), "DELIVERY_REPORTS_URL": url})
    [sent] = accepted(db, channel="sms")
    form = [*twilio_form(sent["ref"], "delivered").items(), ("ApiVersion", "2010-04-01"), ("ApiVersion", "2010-04-01")]
    data = "https://cb:secret@reports.example.com:443/delivery_reports/twilio" + "".join(
        k + v for k, v in sorted(set(form))
    )
    signature = base64.b64encode(hmac.new(TWILIO_TOKEN.encode(), data.encode(), hashlib.sha1).digest()).decode()
    headers = {"X-Twilio-Signature": signature, "Content-Type": "application/x-www-form-urlencoded"}
    answer = client.post("/twilio", data=urlencode(form).encode(), headers=headers)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    assert answer.get_json()["delivered"] == 1


def test_twilio_unsigned_and_malformed(client, db):
    body, headers = twilio_post(twilio_form("SM" + "0" * 32, "delivered"))
    assert client.post("/twilio", data=body, headers={"Content-Type": headers["Content-Type"]}).status_code == 401
    body, headers = twilio_post({"MessageStatus": "delivered"})  # signed, but no MessageSid
    assert client.post("/twilio", data=body, headers=headers).status_code == 400
    assert client.get("/twilio").status_code == 405
    assert client.post("/elsewhere", data=b"").status_code == 404


def test_a_whatsapp_status_callback_is_verified_with_twilios_signature_as_an_sms_one(client, db):
    form = twilio_form("SM" + "2" * 32, "undelivered", ErrorCode="63003", To="whatsapp:+14155550100")
    body, headers = twilio_post(form)
    assert client.post("/twilio", data=body, headers={"Content-Type": headers["Content-Type"]}).status_code == 401
    assert client.post("/twilio", data=body, headers=headers).get_json()["unknown"] == 1  # verified; no intent of ours
    assert observations(db) == []


def test_not_configured_provider_is_refused(app_client, db, monkeypatch):
    monkeypatch.delenv("SENDGRID_WEBHOOK_PUBLIC_KEY", raising=False)
    client = app_client("delivery_reports")
    body = b"[]"
    assert client.post("/sendgrid", data=body, headers=sendgrid_headers(body)).status_code == 403


def test_hard_bounce_of_the_last_channel_records_the_delivery_failed_event(client, db):
    [sent] = accepted(db, prefix="evt")
    db.run("SET signup_verification.webhooks = 'on'")  # what WEBHOOK_URL sends at connection start-up
    bounce = sendgrid_event(sent["intent_id"], sent["attempt_id"], "dropped", reason="Bounced Address")
    from signup_verification.delivery import reports as domain

    batch = domain.sendgrid_events(json.dumps([bounce]).encode())
    assert domain.ingest(db, "sendgrid", batch.observations).undeliverable == 1
    events = db.run(
        "SELECT event_type FROM delivery_intents WHERE verification_id = :v AND role = 'event'",
        v=sent["verification_id"],
    )
    assert events == [["delivery.failed"]]


def test_inspect_shows_the_reports_in_the_timeline(client, db):
    from signup_verification.operations import timeline

    [sent] = accepted(db, prefix="insp")
    post_sendgrid(client, [sendgrid_event(sent["intent_id"], sent["attempt_id"], "deferred"),
                           sendgrid_event(sent["intent_id"], sent["attempt_id"])])  # fmt: skip
    found = timeline.timeline(db, sent["verification_id"])
    reported = [e.detail for e in found.events if e.kind == "reported"]
    received = [r.rsplit(", received ", 1)[-1] for r in reported]  # the report's arrival, in the one format
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", at) for at in received), received
    assert reported == [f"sendgrid says deferred for attempt {sent['attempt_id']}, received {received[0]}",
                        f"sendgrid says delivered for attempt {sent['attempt_id']}, received {received[1]}"]  # fmt: skip
    assert "someone@example.com" not in timeline.render(found)


def test_signed_reports_with_odd_field_types_are_not_a_5xx(client, db):
    """A signed SendGrid event whose `event` is a list or an object is skipped and counted as
    malformed; a Twilio ErrorCode beyond the integer column is no code: the message still failed
    for good (undelivered), for a reason nobody can name, and nobody's address is blamed."""
    body = json.dumps([{"event": ["delivered"], "sg_event_id": "odd-1"}, {"event": {"x": 1}}]).encode()
    response = client.post("/sendgrid", data=body, headers=sendgrid_headers(body))
    assert response.status_code == 200 and observations(db) == [] and response.get_json()["malformed"] == 2
    [sent] = accepted(db, channel="sms")
    body, headers = twilio_post(twilio_form(sent["ref"], "undelivered", ErrorCode="99999999999"))
    response = client.post("/twilio", data=body, headers=headers)
    assert response.status_code == 200 and response.get_json()["undeliverable"] == 1
    row = intent(db, sent["intent_id"])
    assert (row["status"], row["failure_category"], row["failure_code"]) == ("failed", "unknown", None)
    assert db.run("SELECT count(*) FROM destination_suppressions")[0][0] == 0


def test_a_delivered_report_that_overtakes_our_settle_is_kept(db):
    """The provider answered, its delivered event arrived before our settle committed (the local
    mailbox reports that fast with --report-delay 0): delivered_at survives the settle."""
    from signup_verification.delivery import reports as report_model
    from signup_verification.outbox import transitions as t
    from signup_verification.outbox.transitions import Settlement
    from support.factories import make_verifications

    make_verifications(db, 1, "email", prefix="early")
    [c] = t.claim(db, "w", 1, 30)
    [b] = t.begin_attempts(db, "w", [c.fence])
    early = report_model.Observation(dedup_key="early-1", event="delivered", intent_id=c.id, attempt_id=b.attempt_id)
    assert report_model.ingest(db, "sendgrid", [early]).delivered == 1
    t.settle(db, "w", [Settlement(c.id, c.lease_version, "accepted", provider_ref="q-early")])
    row = db.single("SELECT status, delivered_at FROM delivery_intents WHERE id = :i", i=c.id)
    assert row["status"] == "accepted" and row["delivered_at"] is not None
