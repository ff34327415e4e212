"""The channel adapters as the unit tests drive them: a rendered message, a deadline, and adapters
pointed at the local fake providers."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from signup_verification.delivery.channels.http import HttpClient
from signup_verification.delivery.channels.sendgrid import SendGridChannel
from signup_verification.delivery.channels.twilio import TwilioChannel
from signup_verification.delivery.channels.twilio_voice import TwilioVoiceChannel
from signup_verification.delivery.channels.twilio_whatsapp import TwilioWhatsAppChannel
from signup_verification.delivery.config import MessageConfig
from signup_verification.delivery.messages import Renderer, sample_intent
from signup_verification.outbox.transitions import BegunAttempt
from signup_verification.verifications.tokens import Keyring
from support.paths import TEST_TOKEN_KEYS

KEYRING = Keyring.parse(TEST_TOKEN_KEYS)
MESSAGES = MessageConfig(email_from="Signup <no-reply@example.org>")
PHONE = "+14155550100"


def render(channel: str, destination: str, intent_id: int = 1, version: str = "signup/v1", locale: str = "en"):
    intent = sample_intent(
        channel,
        version,
        locale,
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


def whatsapp_channel(fake, sender="whatsapp:+15005550006", contents=None, timeout=2.0) -> TwilioWhatsAppChannel:
    from support.fakes.twilio import whatsapp_contents

    sids = whatsapp_contents() if contents is None else contents
    return TwilioWhatsAppChannel(fake.account_sid, fake.auth_token, sender, fake.url, HttpClient(timeout=timeout), sids)


def voice_channel(fake, caller_id="+15005550006", timeout=2.0, **options) -> TwilioVoiceChannel:
    client = HttpClient(timeout=timeout)
    return TwilioVoiceChannel(fake.account_sid, fake.auth_token, caller_id, fake.url, client, **options)
