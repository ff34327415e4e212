"""Webhook events delivered by the same dispatcher as email and SMS, to a receiver that
speaks HTTP for real and verifies with the standardwebhooks library."""

from __future__ import annotations

import pytest

from signup_verification.delivery.events import webhook_id
from signup_verification.outbox import transitions as t
from signup_verification.verifications import confirm as confirmations
from support.dispatch import KEYRING, provider_settings, run_dispatch
from support.factories import make_verifications, run
from support.fakes.http import Answer
from support.fakes.smtp import FakeSmtpServer
from support.fakes.webhooks import FakeWebhookReceiver, new_secret
from support.webhooks import VERIFIED_ONLY, events, link_token, webhook_settings

pytestmark = pytest.mark.webhook_events(event_types=VERIFIED_ONLY)  # one event per confirmation


@pytest.fixture
def receiver():
    with FakeWebhookReceiver() as fake:
        yield fake


def _verified(db, n=1):
    ids = make_verifications(db, n)
    for vid in ids:
        assert confirmations.confirm_link(db, KEYRING, link_token(db, vid)).result == "verified"
    return ids


def _due_now(db):
    db.run(
        "UPDATE delivery_intents SET next_attempt_at = now() WHERE role = 'event' AND status IN ('retryable', 'ambiguous')"
    )


def _attempts(db, intent_id):
    rows = db.run("SELECT outcome, error_class FROM delivery_attempts WHERE intent_id = :i ORDER BY id", i=intent_id)
    return [tuple(r) for r in rows]


def test_a_verified_event_arrives_signed_as_the_library_expects(edb, receiver):
    [vid] = _verified(edb)
    report = run_dispatch(edb, webhook_settings(receiver))
    assert report.accepted == 1 and report.suppressed == 0
    [body] = receiver.events()
    assert body["type"] == "verification.verified" and body["data"]["verification_id"] == str(vid)
    assert body["timestamp"].endswith("Z") and body["data"]["status"] == "verified"
    [delivery] = receiver.deliveries
    assert delivery.destination == webhook_id(vid, "verification.verified")
    headers = {k.lower(): v for k, v in delivery.headers.items()}
    assert headers["content-type"] == "application/json" and headers["webhook-timestamp"].isdigit()
    [event] = events(edb, vid)
    assert event["status"] == "accepted" and _attempts(edb, event["id"]) == [("attempting", None), ("accepted", None)]


def test_the_worker_never_gets_the_destination_of_an_event(edb, log_lines):
    [vid] = _verified(edb)
    [event] = [c for c in t.claim(edb, "w", 10, 30) if c.is_event]
    assert event.destination is None and event.event_type == "verification.verified"
    assert event.payload["verification_id"] == str(vid)


def _with(signing, receiving):
    """A config that signs with `signing`'s secrets and posts to `receiving`."""
    return provider_settings(webhook_url=receiving.endpoint, webhook_secret=",".join(signing.secrets))


def test_every_secret_signs_so_a_receiver_knowing_either_verifies(edb):
    old, new = new_secret(), new_secret()
    with FakeWebhookReceiver(old, new) as both, FakeWebhookReceiver(old) as before, FakeWebhookReceiver(new) as after:
        _verified(edb)
        for receiver in (before, after):  # mid-rotation, the receiver knows one of WEBHOOK_SECRET's two
            edb.run("UPDATE delivery_intents SET status = 'ready', completed_at = NULL WHERE role = 'event'")
            assert run_dispatch(edb, _with(both, receiver)).accepted == 1
            assert len(receiver.events()) == 1
            signatures = receiver.deliveries[0].headers["webhook-signature"].split(" ")
            assert len(signatures) == 2 and all(s.startswith("v1,") for s in signatures)


def test_a_receiver_that_refuses_the_signature_fails_the_event_loudly(edb, receiver):
    _verified(edb)
    with FakeWebhookReceiver() as other:  # other secrets: the library refuses, the receiver answers 401
        report = run_dispatch(edb, _with(other, receiver))
    assert report.failed == 1 and receiver.refused == 1 and receiver.events() == []
    [event] = events(edb)
    assert event["status"] == "failed" and "configuration" in event["last_error"]


def test_5xx_then_success_resends_with_the_same_webhook_id(edb, receiver):
    [vid] = _verified(edb)
    receiver.script(Answer(503, {"error": "down"}), Answer(500))
    settings = webhook_settings(receiver)
    assert run_dispatch(edb, settings).retryable == 1
    _due_now(edb)
    assert run_dispatch(edb, settings).retryable == 1
    _due_now(edb)
    assert run_dispatch(edb, settings).accepted == 1
    ids = {e.headers["webhook-id"] for e in receiver.exchanges}
    assert ids == {webhook_id(vid, "verification.verified")} and len(receiver.exchanges) == 3
    timestamps = [int(e.headers["webhook-timestamp"]) for e in receiver.exchanges]
    assert timestamps == sorted(timestamps)  # each attempt signs at its own send time


def test_429_honours_retry_after(edb, receiver):
    _verified(edb)
    receiver.script(Answer(429, {"error": "slow down"}, headers={"Retry-After": "600"}))
    run_dispatch(edb, webhook_settings(receiver))
    wait = edb.single(
        "SELECT extract(epoch FROM next_attempt_at - updated_at)::float8 AS s, status FROM delivery_intents"
        " WHERE role = 'event'"
    )
    assert wait["status"] == "retryable" and wait["s"] >= 599


def test_a_redirect_is_not_followed_and_fails_the_event(edb, receiver):
    _verified(edb)
    receiver.script(Answer(307, headers={"Location": "http://127.0.0.1:9/elsewhere"}))
    report = run_dispatch(edb, webhook_settings(receiver))
    assert report.failed == 1 and len(receiver.exchanges) == 1
    assert "redirect" in events(edb)[0]["last_error"]


def test_a_4xx_fails_the_event_for_good(edb, receiver):
    _verified(edb)
    receiver.script(Answer(422, {"error": "unknown account"}))
    assert run_dispatch(edb, webhook_settings(receiver)).failed == 1
    assert events(edb)[0]["status"] == "failed"


def test_a_reset_after_the_body_is_ambiguous_then_resent_with_the_same_id(edb, receiver):
    [vid] = _verified(edb)
    receiver.script(Answer(reset=True))
    settings = webhook_settings(receiver)
    assert run_dispatch(edb, settings).ambiguous == 1
    _due_now(edb)
    run(edb)  # the reconciler resolves the hold: 'retry' for webhooks
    assert events(edb)[0]["status"] == "retryable"
    _due_now(edb)
    assert run_dispatch(edb, settings).accepted == 1
    assert receiver.webhook_ids() == [webhook_id(vid, "verification.verified")] * 2  # the duplicate, same id
    [event] = events(edb)
    assert [o for o, _ in _attempts(edb, event["id"])] == ["attempting", "ambiguous", "attempting", "accepted"]


def test_events_and_emails_go_out_in_the_same_dispatch(edb, receiver):
    ids = make_verifications(edb, 3)
    confirmations.confirm_link(edb, KEYRING, link_token(edb, ids[0]))
    with FakeSmtpServer() as smtp:
        settings = webhook_settings(receiver, email_transport="smtp", smtp_host=smtp.host, smtp_port=smtp.port)
        report = run_dispatch(edb, settings)
    assert report.accepted == 3  # two emails (the verified one's was suppressed) and one event
    assert len(receiver.events()) == 1
