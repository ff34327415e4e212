"""The mailbox's emulated provider reports: what it posts, when, and signed how,
checked with the verification code the delivery_reports target runs (api/report_signatures.py)."""

from __future__ import annotations

import json
import stat
import threading
import time
from urllib.parse import parse_qsl

import flask
import pytest
from werkzeug.serving import make_server

from signup_verification.api.report_signatures import sendgrid_public_key, sendgrid_valid, twilio_valid
from signup_verification.local import provider_reports
from signup_verification.local.mailstore import Mailbox
from support.waiting import until

TOKEN = "reporter-token"  # nosec B105: a test value


@pytest.fixture
def receiver():
    """A stand-in delivery_reports target that records every post (body and headers)."""
    posts: list[tuple[str, bytes, dict[str, str]]] = []
    app = flask.Flask("receiver")

    @app.post("/<path:route>")
    def record(route: str):
        posts.append((route, flask.request.get_data(), dict(flask.request.headers)))
        return flask.jsonify({"received": 1, "stored": 1})

    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}", posts
    server.shutdown()


def _email(box: Mailbox):
    raw = (
        b"From: a@example.org\r\nTo: ada@example.com\r\nSubject: hi\r\nMessage-ID: <m1@example.org>\r\n"
        b"X-Delivery-Attempt: 42:3\r\n\r\nhello\r\n"
    )
    return box.add_email(raw, "a@example.org", ["ada@example.com"])


def test_the_development_key_is_made_once_private_and_is_what_the_target_accepts(tmp_path):
    key = provider_reports.development_sendgrid_key(tmp_path)
    again = provider_reports.development_sendgrid_key(tmp_path)
    assert provider_reports.public_key_setting(key) == provider_reports.public_key_setting(again)
    assert stat.S_IMODE((tmp_path / provider_reports.KEY_FILE).stat().st_mode) == 0o600
    sendgrid_public_key(provider_reports.public_key_setting(key))  # the config loader's check: no ConfigError


def test_an_email_is_reported_delivered_after_the_delay_signed_with_our_custom_args(tmp_path, receiver):
    url, posts = receiver
    box = Mailbox()
    key = provider_reports.development_sendgrid_key(tmp_path)
    reporter = provider_reports.Reporter(box, sendgrid_url=url + "/sendgrid", sendgrid_key=key, delay=0.3).start()
    try:
        message = _email(box)
        reporter.email_received(message)
        assert box.get(message.id).delivery == "sent" and posts == []  # not before the delay
        until(lambda: box.get(message.id).delivery == "delivered")
    finally:
        reporter.stop()
    [(route, body, headers)] = posts
    assert route == "sendgrid"
    assert sendgrid_valid(
        key.public_key(),
        headers["X-Twilio-Email-Event-Webhook-Signature"],
        headers["X-Twilio-Email-Event-Webhook-Timestamp"],
        body,
    )
    [event] = json.loads(body)
    assert (event["event"], event["intent_id"], event["attempt_id"]) == ("delivered", "42", "42:3")
    assert event["sg_message_id"].split(".")[0] == message.sid and event["sg_event_id"]
    assert box.get(message.id).delivery_note == "SendGrid delivered: 200 received 1, stored 1"


def test_bounce_this_replaces_the_pending_delivered_report_with_a_hard_bounce(tmp_path, receiver):
    url, posts = receiver
    box = Mailbox()
    reporter = provider_reports.Reporter(
        box, sendgrid_url=url + "/sendgrid", sendgrid_key=provider_reports.development_sendgrid_key(tmp_path), delay=0.3
    ).start()
    try:
        message = _email(box)
        reporter.email_received(message)
        reporter.bounce(message)
        time.sleep(0.6)
    finally:
        reporter.stop()
    assert [json.loads(body)[0]["event"] for _, body, _ in posts] == ["bounce"]
    [event] = json.loads(posts[0][1])
    assert (event["type"], event["status"]) == ("bounce", "5.1.1")
    assert box.get(message.id).delivery == "bounced"


@pytest.mark.parametrize(
    ("to", "final", "code"),
    [
        ("+14155550100", "delivered", None),
        ("+12025550110", "undelivered", "30003"),
        ("+12025550111", "failed", "30005"),
    ],
)
def test_an_sms_gets_signed_status_callbacks_in_order(receiver, to, final, code):
    url, posts = receiver
    box = Mailbox()
    reporter = provider_reports.Reporter(box, twilio_account_sid="AC" + "1" * 32, twilio_auth_token=TOKEN, delay=0)
    reporter.start()
    try:
        message = box.add_sms(to, "+15005550006", "Your code is 123456", status_callback=url + "/twilio")
        reporter.sms_accepted(message)
        reporter.report_now(message.id)
        until(lambda: box.get(message.id).delivery == final)
    finally:
        reporter.stop()
    forms = [parse_qsl(body.decode()) for _, body, _ in posts]
    assert [dict(f)["MessageStatus"] for f in forms] == ["queued", "sent", final]
    assert all(dict(f)["MessageSid"] == message.sid for f in forms)
    assert dict(forms[-1]).get("ErrorCode") == code
    assert all(
        twilio_valid(TOKEN, url + "/twilio", f, h["X-Twilio-Signature"])
        for f, (_, _, h) in zip(forms, posts, strict=True)
    )


def test_an_sms_without_status_callback_is_never_reported(receiver):
    box = Mailbox()
    reporter = provider_reports.Reporter(box, twilio_auth_token=TOKEN, delay=0).start()
    try:
        message = box.add_sms("+14155550100", "+15005550006", "hi")
        reporter.sms_accepted(message)
        assert reporter.pending(message.id) == [] and box.get(message.id).delivery is None
    finally:
        reporter.stop()
