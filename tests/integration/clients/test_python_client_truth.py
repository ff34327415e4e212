"""clients/python against the real service for what a site acts on: a fallback and its policy, the key
to retry with on every create error, the secret that proved a verification (verified_channel,
verified_via) and each delivery's truth (delivered_at, failed_at, reason), read through the client."""

from __future__ import annotations

import os
import re
import uuid

import pytest
import requests
import signup_verification_client as svc

from signup_verification import runtime
from support.client_calls import fresh_email, no_sleep
from support.dispatch import provider_settings, run_dispatch
from support.fakes.smtp import FakeSmtpServer, SmtpBehaviour
from support.fakes.twilio import FakeTwilio
from support.policy import sent
from support.reports import reports_env, twilio_form, twilio_post
from support.served import serve
from support.webhooks import link_token, sms_code

TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
PHONE = "+14155550142"


@pytest.fixture
def urls(service_env, monkeypatch):
    for name, value in reports_env().items():
        monkeypatch.setenv(name, value)
    runtime.reset()
    with serve("create_verification", "confirm_verification", "delivery_reports") as served:
        yield served


@pytest.fixture
def client(urls):
    return svc.Client(urls["create_verification"], urls["confirm_verification"], sleep=no_sleep)


# -- the fallback and the key to retry with ------------------------------------------------------
def test_a_fallback_is_sent_with_the_create_and_its_policy_comes_back(client):
    created = client.create("acct-f1", "email", fresh_email(), fallback=svc.Fallback("sms", PHONE, 30))
    assert created.fallback == svc.FallbackPolicy("sms", 30, "fallback")
    state = client.get(created.verification_id)
    assert [(d.channel, d.role) for d in state.deliveries] == [("email", "primary"), ("sms", "fallback")]
    assert state.deliveries[1].destination.endswith("0142") and PHONE not in state.deliveries[1].destination


def test_steps_are_the_fallback_in_order_and_each_delivery_says_its_step(client):
    email = fresh_email()
    steps = [svc.Step("email", email), svc.Step("sms", PHONE, 30)]
    created = client.create_steps("acct-s1", steps, idempotency_key="steps-1")
    assert created.fallback == svc.FallbackPolicy("sms", 30, "fallback")
    # the same steps through the shorthand: the same request, so the key replays the first answer
    again = client.create("acct-s1", "email", email, fallback=svc.Fallback("sms", PHONE, 30), idempotency_key="steps-1")
    assert again.replayed and again.verification_id == created.verification_id
    state = client.get(created.verification_id)
    assert [(d.step, d.channel, d.after_seconds) for d in state.deliveries] == [(1, "email", 0), (2, "sms", 30)]
    with pytest.raises(svc.InvalidRequest) as same_channel:
        client.create_steps("acct-s2", [svc.Step("sms", PHONE), svc.Step("sms", "+14155550143", 30)])
    assert [e["pointer"] for e in same_channel.value.errors] == ["#/steps"]


def test_three_steps_come_back_in_order_and_a_replay_answers_the_same_three(client):
    steps = [svc.Step("email", fresh_email()), svc.Step("sms", PHONE, 30), svc.Step("whatsapp", PHONE, 90)]
    created = client.create_steps("acct-s3", steps, idempotency_key="steps-3")
    assert created.steps == (
        svc.StepPolicy("email", 0),
        svc.StepPolicy("sms", 30),
        svc.StepPolicy("whatsapp", 90),
    )
    again = client.create_steps("acct-s3", steps, idempotency_key="steps-3")
    assert again.replayed and (again.verification_id, again.steps) == (created.verification_id, created.steps)
    state = client.get(created.verification_id)
    assert [(d.step, d.channel, d.role) for d in state.deliveries] == [
        (1, "email", "primary"),
        (2, "sms", "fallback"),
        (3, "whatsapp", "fallback"),
    ]


def test_a_fallback_due_at_once_is_the_both_policy_and_no_fallback_reads_none(client):
    both = client.create("acct-f2", "sms", PHONE, fallback=svc.Fallback("email", fresh_email(), 0))
    assert both.fallback == svc.FallbackPolicy("email", 0, "both")
    assert client.create("acct-f3", "email", fresh_email()).fallback is None


def test_a_refused_fallback_is_an_invalid_request_naming_it(client, db):
    with pytest.raises(svc.InvalidRequest) as same_channel:
        client.create("acct-f4", "email", fresh_email(), fallback=svc.Fallback("email", fresh_email(), 30))
    assert [e["pointer"] for e in same_channel.value.errors] == ["#/fallback"]
    with pytest.raises(svc.InvalidRequest) as too_late:  # due at or after expiry: never sendable
        client.create("acct-f4", "email", fresh_email(), fallback=svc.Fallback("sms", PHONE, 600))
    assert [e["pointer"] for e in too_late.value.errors] == ["#/fallback/after_seconds"]
    assert db.run("SELECT count(*) FROM verifications")[0][0] == 0


def test_every_error_create_raises_carries_the_key_it_was_sent_under(client, urls):
    with pytest.raises(svc.InvalidRequest) as invalid:
        client.create("acct-k1", "email", "not an address")
    assert uuid.UUID(invalid.value.idempotency_key or "")
    first = client.create("acct-k1", "email", fresh_email())
    with pytest.raises(svc.IdempotencyKeyReused) as reused:
        client.create("acct-k1", "email", fresh_email(), idempotency_key=first.idempotency_key)
    assert reused.value.idempotency_key == first.idempotency_key
    with pytest.raises(svc.Unavailable) as unreachable:  # nothing listens there: the service may or may not have it
        svc.Client("http://127.0.0.1:9/", max_attempts=1).create(
            "acct-k1", "email", fresh_email(), idempotency_key="k-9"
        )
    assert (unreachable.value.slug, unreachable.value.idempotency_key) == ("unreachable", "k-9")
    assert client.get(first.verification_id).status == "pending"  # get raises nothing here; its errors have no key


def test_the_key_of_a_failed_create_retries_it_once_the_service_is_back(urls, db, monkeypatch):
    database_url = os.environ["DATABASE_URL"]
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/nothing")
    runtime.reset()
    client = svc.Client(urls["create_verification"], max_attempts=1)
    destination = fresh_email()
    with pytest.raises(svc.Unavailable) as down:
        client.create("acct-k2", "email", destination, fallback=svc.Fallback("sms", PHONE, 30))
    key = down.value.idempotency_key
    assert key and down.value.retry_after == 5
    monkeypatch.setenv("DATABASE_URL", database_url)
    runtime.reset()
    retried = client.create(
        "acct-k2", "email", destination, fallback=svc.Fallback("sms", PHONE, 30), idempotency_key=key
    )
    again = client.create("acct-k2", "email", destination, fallback=svc.Fallback("sms", PHONE, 30), idempotency_key=key)
    assert retried.idempotency_key == key and again.replayed and again.verification_id == retried.verification_id
    assert db.run("SELECT count(*) FROM verifications")[0][0] == 1


# -- the proof is named (needs the service's verified_channel / verified_via) ----------------------
def test_an_email_verification_confirmed_by_its_sms_fallback_names_the_phone_then_the_link_the_address(
    client, urls, db
):
    created = client.create("acct-p1", "email", fresh_email(), fallback=svc.Fallback("sms", PHONE, 0))
    assert created.code_entry_url and "?entry=" in created.code_entry_url  # an SMS is among the channels
    before = client.get(created.verification_id)
    assert (before.verified_channel, before.verified_via, before.proofs) == (None, None, ())
    sent(db, uuid.UUID(created.verification_id), "sms")
    confirmed = client.confirm_code(created.verification_id, sms_code(db, uuid.UUID(created.verification_id)))
    assert (confirmed.channel, confirmed.verified_channel, confirmed.verified_via) == ("email", "sms", "code")
    assert confirmed.proof is not None and confirmed.proof.channel == "sms"
    state = client.get(created.verification_id)
    assert (state.channel, state.status, state.verified_channel, state.verified_via) == (
        "email",
        "verified",
        "sms",
        "code",
    )
    assert state.proved("sms") and not state.proved("email")  # the address is not proved by the code
    token = link_token(db, uuid.UUID(created.verification_id))
    assert requests.post(urls["confirm_verification"], json={"token": token}, timeout=10).status_code == 200
    later = client.get(created.verification_id)
    assert [(p.channel, p.via) for p in later.proofs] == [("sms", "code"), ("email", "link")]
    assert later.verified_channel == "sms"  # the first proof stays the first
    for stamp in (state.created_at, state.expires_at, state.verified_at, confirmed.verified_at, later.proofs[1].at):
        assert TIMESTAMP.fullmatch(stamp or ""), stamp


def test_a_link_confirmed_verification_names_the_email(client, urls, db):
    created = client.create("acct-p2", "email", fresh_email(), fallback=svc.Fallback("sms", PHONE, 0))
    token = link_token(db, uuid.UUID(created.verification_id))
    answer = requests.post(urls["confirm_verification"], json={"token": token}, timeout=10)
    assert answer.status_code == 200, answer.text
    state = client.get(created.verification_id)
    assert (state.status, state.verified_channel, state.verified_via) == ("verified", "email", "link")
    assert [p.channel for p in state.proofs] == ["email"] and state.proofs[0].destination.startswith("a***@")


# -- the delivery truth (needs the service's delivered_at / failed_at / reason) --------------------
def test_a_refused_email_reads_failed_with_its_reason(client, db):
    with FakeSmtpServer() as smtp:
        smtp.behaviour = SmtpBehaviour(rcpt_reply=lambda address: "550 5.1.1 no such user")
        created = client.create("acct-d1", "email", fresh_email())
        run_dispatch(db, provider_settings(smtp=smtp))
    [delivery] = client.get(created.verification_id).deliveries
    assert (delivery.status, delivery.last_outcome, delivery.accepted_at) == ("failed", "failed", None)
    assert TIMESTAMP.fullmatch(delivery.failed_at or "") and delivery.delivered_at is None
    assert delivery.reason is not None
    assert (delivery.reason.provider, delivery.reason.code, delivery.reason.fault) == ("smtp", "5.1.1", "recipient")
    assert delivery.reason.category in ("bounced", "invalid_destination")


def _sent_sms(client, db) -> tuple[str, str]:
    """An SMS verification whose message Twilio accepted: (verification id, MessageSid)."""
    with FakeTwilio() as twilio:
        created = client.create("acct-d2", "sms", PHONE)
        run_dispatch(db, provider_settings(twilio=twilio))
    [(sid,)] = db.run(
        "SELECT a.provider_ref FROM delivery_attempts AS a JOIN delivery_intents AS i ON i.id = a.intent_id"
        " WHERE i.verification_id = :v AND a.outcome = 'accepted'",
        v=uuid.UUID(created.verification_id),
    )
    return created.verification_id, sid


def _report(urls, form: dict[str, str]) -> None:
    body, headers = twilio_post(form)
    answer = requests.post(urls["delivery_reports"] + "twilio", data=body, headers=headers, timeout=10)
    assert answer.status_code == 200, answer.text


def test_a_delivered_sms_reads_delivered_with_both_times(client, urls, db):
    verification_id, sid = _sent_sms(client, db)
    [accepted] = client.get(verification_id).deliveries
    assert (accepted.status, accepted.last_outcome, accepted.reason) == ("accepted", "accepted", None)
    assert accepted.accepted_at and accepted.delivered_at is None
    _report(urls, twilio_form(sid, "delivered"))
    [delivered] = client.get(verification_id).deliveries
    assert (delivered.status, delivered.last_outcome, delivered.reason) == ("delivered", "accepted", None)
    assert TIMESTAMP.fullmatch(delivered.delivered_at or "") and delivered.accepted_at == accepted.accepted_at


def test_an_unreachable_handset_reads_undeliverable_and_is_not_the_recipients_fault(client, urls, db):
    verification_id, sid = _sent_sms(client, db)
    _report(urls, twilio_form(sid, "undelivered", ErrorCode="30003"))
    [delivery] = client.get(verification_id).deliveries
    assert delivery.status == "undeliverable" and TIMESTAMP.fullmatch(delivery.failed_at or "")
    assert delivery.accepted_at is not None and delivery.last_outcome == "accepted"
    assert delivery.reason is not None
    assert (delivery.reason.category, delivery.reason.code, delivery.reason.provider) == (
        "unreachable",
        "30003",
        "twilio",
    )
    assert delivery.reason.fault != "recipient"
