"""Shared set-up for the dispatcher tests: settings pointing at the local fake providers."""
from __future__ import annotations

import dataclasses

from signup_verification.channels import build_channels
from signup_verification.dispatcher import Dispatcher, DispatchReport
from signup_verification.settings import Settings
from signup_verification.tokens import Keyring
from conftest import TEST_TOKEN_KEYS

KEYRING = Keyring.parse(TEST_TOKEN_KEYS)


def provider_settings(smtp=None, twilio=None, **overrides) -> Settings:
    base = Settings(
        deployment="test", token_keys=TEST_TOKEN_KEYS, email_from="Signup <no-reply@example.org>",
        verify_link_base="https://app.example.org/confirm", rate_limit_per_hour=10_000, rate_limit_spacing_seconds=0,
        function_timeout_seconds=30, send_timeout_seconds=2.0, send_concurrency=4)
    if smtp is not None:
        base = dataclasses.replace(base, email_transport="smtp", smtp_host=smtp.host, smtp_port=smtp.port)
    if twilio is not None:
        base = dataclasses.replace(base, sms_transport="twilio", twilio_account_sid=twilio.account_sid,
                                   twilio_auth_token=twilio.auth_token, twilio_from="+15005550006",
                                   twilio_api_url=twilio.url)
    return dataclasses.replace(base, **overrides)


def run_dispatch(db, settings: Settings, *, channels=None, dispatcher_class=Dispatcher, **kwargs) -> DispatchReport:
    channels = channels or build_channels(settings)
    try:
        return dispatcher_class(db, settings, KEYRING, channels, **kwargs).run()
    finally:
        for channel in channels.values():
            channel.close()


def intent(db, intent_id: int) -> dict:
    return db.one("SELECT * FROM delivery_intents WHERE id = :id", id=intent_id)


def attempts(db, intent_id: int) -> list[tuple[str, str, str | None]]:
    rows = db.run("SELECT attempt_id, outcome, error_class FROM delivery_attempts WHERE intent_id = :id ORDER BY id",
                  id=intent_id)
    return [tuple(r) for r in rows]
