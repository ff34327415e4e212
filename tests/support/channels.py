"""The channel adapters as the unit tests drive them: a rendered message, a deadline, and adapters
pointed at the local fake providers."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from signup_verification.delivery.channels.http import HttpClient
from signup_verification.delivery.channels.sendgrid import SendGridChannel
from signup_verification.delivery.channels.twilio import TwilioChannel
from signup_verification.delivery.config import MessageConfig
from signup_verification.delivery.messages import Renderer, sample_intent
from signup_verification.outbox.transitions import BegunAttempt
from signup_verification.verifications.tokens import Keyring
from support.paths import TEST_TOKEN_KEYS

KEYRING = Keyring.parse(TEST_TOKEN_KEYS)
MESSAGES = MessageConfig(email_from="Signup <no-reply@example.org>")
PHONE = "+14155550100"


def render(channel: str, destination: str, intent_id: int = 1):
    intent = sample_intent(
        channel,
        "signup/v1",
        "en",
        destination=destination,
        key_id="test-k1",
        expires_at=datetime.now(UTC) + timedelta(minutes=10),
        intent_id=intent_id,
    )
    return Renderer(MESSAGES, KEYRING).render(intent, BegunAttempt(intent_id, f"{intent_id}:1", 1))


def soon(seconds: float = 5.0) -> float:
    return time.monotonic() + seconds


def sendgrid_channel(fake, key=None, timeout=2.0) -> SendGridChannel:
    return SendGridChannel(key or fake.api_key, fake.send_url, HttpClient(timeout=timeout))


def twilio_channel(fake, token=None, sender="+15005550006", timeout=2.0) -> TwilioChannel:
    return TwilioChannel(fake.account_sid, token or fake.auth_token, sender, fake.url, HttpClient(timeout=timeout))
