"""Operator side: `verifyctl inspect` shows a verification's webhook events with their
attempts, and `verifyctl status` / the signals carry the webhook channel."""

from __future__ import annotations

import json

from signup_verification import cli
from signup_verification.delivery.events import webhook_id
from signup_verification.operations import signals
from signup_verification.operations import timeline as inspect
from signup_verification.verifications import confirm as confirmations
from support.dispatch import KEYRING, run_dispatch
from support.factories import make_verifications
from support.fakes.http import Answer
from support.fakes.webhooks import FakeWebhookReceiver
from support.webhooks import link_token, webhook_settings


def test_inspect_shows_each_event_and_its_attempts(edb):
    [vid] = make_verifications(edb, 1)
    token = link_token(edb, vid)
    confirmations.confirm_link(edb, KEYRING, token)
    with FakeWebhookReceiver() as receiver:
        receiver.script(Answer(503, {"error": "maintenance for ada@example.com"}))
        run_dispatch(edb, webhook_settings(receiver))
    found = inspect.timeline(edb, vid)
    event, proved = found.webhook_events
    assert event["type"] == "verification.verified"
    assert event["webhook_id"] == webhook_id(vid, "verification.verified")
    # One batch sends both events at once: the 503 answers whichever request reached the receiver first.
    [refused] = [e for e in (event, proved) if e["status"] == "retryable"]
    assert [a["outcome"] for a in refused["attempt_log"]] == ["attempting", "retryable"]
    assert (proved["type"], proved["subject"]) == ("verification.proved", "email")  # one per proof, its channel
    assert proved["webhook_id"] == webhook_id(vid, "verification.proved", "email") != event["webhook_id"]
    assert found.intent["status"] == "suppressed"  # the message intent is still the one shown above
    text = inspect.render(found)
    assert "webhook events" in text and "verification.verified" in text and "receiver_error" in text
    assert "verification.proved (email)" in text
    assert "ada@example.com" not in text and token not in text
    as_json = json.dumps(found.as_json())
    assert "ada@example.com" not in as_json and as_json.count("msg_") == 2


def test_signals_and_status_show_the_webhook_channel(edb, service_env, monkeypatch, capsys):
    [vid] = make_verifications(edb, 1)
    confirmations.confirm_link(edb, KEYRING, link_token(edb, vid))
    webhook = signals.compute(edb, "test").channel("webhook")
    assert webhook.ready_count == 2  # verification.verified and verification.proved
    assert cli.main(["status"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("webhook")]
    assert len(rows) == 1 and rows[0].split()[1] == "2"
