"""The Standard Webhooks shape of our events, judged by the reference library, and the
WEBHOOK_* settings' errors."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from signup_verification.delivery.channels.webhook import WebhookChannel, classify
from signup_verification.delivery.events import EventContent, webhook_id
from signup_verification.delivery.webhook_config import parse_secrets
from signup_verification.platform.errors import ConfigError
from support.config import make_config
from support.fakes.webhooks import new_secret

VID = uuid.UUID("0b7c2c55-3f0e-4c37-9a57-5a1d2a8e6a10")


def _event() -> EventContent:
    data = {"verification_id": str(VID), "status": "verified", "account_id": "acct-1"}
    return EventContent(
        7,
        "7:1",
        webhook_id(VID, "verification.verified"),
        "verification.verified",
        datetime(2026, 12, 1, 12, 0, tzinfo=UTC),
        data,
    )


def _signed(secrets: list[str], now: float) -> tuple[bytes, dict[str, str]]:
    channel = WebhookChannel("http://127.0.0.1:9/", parse_secrets(",".join(secrets)), client=None, clock=lambda: now)  # type: ignore[arg-type]
    body = _event().body()
    return body, channel.headers(_event(), body)


def test_the_library_verifies_each_secret_and_reads_the_body():
    first, second = new_secret(), new_secret()
    now = datetime.now(UTC).timestamp()
    body, headers = _signed([first, second], now)
    for secret in (first, second):
        assert Webhook(secret).verify(body, headers) == json.loads(body)
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(body, headers)
    document = json.loads(body)
    assert document == {
        "type": "verification.verified",
        "timestamp": "2026-12-01T12:00:00.000Z",
        "data": {"verification_id": str(VID), "status": "verified", "account_id": "acct-1"},
    }
    assert headers["webhook-timestamp"] == str(int(now))  # the send time, not the event time


def test_a_stale_send_time_is_refused_by_the_library():
    secret = new_secret()
    body, headers = _signed([secret], datetime.now(UTC).timestamp() - 3600)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body, headers)


def test_the_webhook_id_is_one_per_event_and_type():
    assert webhook_id(VID, "verification.verified") == webhook_id(VID, "verification.verified")
    assert webhook_id(VID, "verification.verified") != webhook_id(VID, "verification.expired")
    assert webhook_id(VID, "verification.verified").startswith("msg_")


@pytest.mark.parametrize(
    ("status", "outcome", "error_class"),
    [
        (200, "accepted", None),
        (204, "accepted", None),
        (408, "retryable", "receiver_error"),
        (429, "retryable", "receiver_busy"),
        (500, "retryable", "receiver_error"),
        (503, "retryable", "receiver_error"),
        (301, "failed", "configuration"),
        (308, "failed", "configuration"),
        (401, "failed", "configuration"),
        (403, "failed", "configuration"),
        (400, "failed", "rejected"),
        (404, "failed", "rejected"),
        (422, "failed", "rejected"),
    ],
)
def test_receiver_answers_map_to_outcomes(status, outcome, error_class):
    result = classify(status, "30" if status in (429, 503) else None, b'{"error": "x"}')
    assert (result.outcome, result.error_class) == (outcome, error_class)
    if status in (429, 503):
        assert result.retry_after == 30


def test_a_receiver_body_is_scrubbed_before_it_is_stored():
    result = classify(400, None, b"bad destination ada@example.com https://app.example.org/confirm?token=abc")
    assert "ada@example.com" not in result.detail and "token=abc" not in result.detail


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"webhook_url": "ftp://x.example/"}, "WEBHOOK_URL must be an absolute http(s) URL"),
        ({"webhook_url": "http://hooks.example.org/", "environment": "production"}, "WEBHOOK_URL must be https"),
        ({"webhook_url": "https://u:p@hooks.example.org/"}, "must not carry credentials"),
        ({"webhook_secret": "abc"}, "WEBHOOK_SECRET entry 1 must start with whsec_"),
        ({"webhook_secret": "whsec_!!!"}, "WEBHOOK_SECRET entry 1 is not valid base64"),
        ({"webhook_secret": "whsec_c2hvcnQ="}, "WEBHOOK_SECRET entry 1 is too short"),
        ({"webhook_max_attempts": "0"}, "WEBHOOK_MAX_ATTEMPTS must be >= 1"),
    ],
)
def test_bad_webhook_settings_are_one_clear_error(settings, message):
    with pytest.raises(ConfigError) as caught:
        make_config(**settings)
    assert any(message in problem for problem in caught.value.problems), caught.value.problems


def test_webhooks_are_off_without_a_url_and_send_their_settings_when_on():
    assert make_config().channels.webhook.session_settings() == {}
    on = make_config(webhook_url="https://hooks.example.org/v", webhook_secret=new_secret(), webhook_max_attempts=3)
    assert on.channels.webhook.session_settings() == {
        "signup_verification.webhooks": "on",
        "signup_verification.webhook_max_attempts": "3",
        "signup_verification.webhook_events": "verification.verified,verification.proved,verification.expired,"
        "verification.locked,"
        "delivery.failed",
    }
    assert "whsec_" not in repr(on.channels.webhook)
    every = make_config(webhook_url="https://hooks.example.org/v", webhook_secret=new_secret(), webhook_events="all")
    assert every.channels.webhook.events[-2:] == ("delivery.delivered", "delivery.bounced")


def test_webhook_events_names_known_types_only():
    with pytest.raises(ConfigError, match="WEBHOOK_EVENTS names unknown event types: delivery.opened"):
        make_config(webhook_url="https://hooks.example.org/v", webhook_events="delivery.failed,delivery.opened")


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"delivery_reports_url": "ftp://x.example/r"}, "DELIVERY_REPORTS_URL must be an http(s) URL"),
        (
            {"delivery_reports_url": "http://verify.example.org/delivery_reports", "environment": "production"},
            "DELIVERY_REPORTS_URL must be https in production",
        ),
    ],
)
def test_bad_delivery_reports_url_is_one_clear_error(settings, message):
    """Review: the providers post (and Twilio signs) to this URL; plain http is refused in production."""
    with pytest.raises(ConfigError) as caught:
        make_config(**settings)
    assert any(message in problem for problem in caught.value.problems), caught.value.problems
