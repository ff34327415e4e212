"""Twilio's magic test numbers at create: refused by type (NANP 500 numbers are personal numbers)
unless the configured sender is Twilio's test sender, +15005550006, which only Twilio's test
credentials can send from; then they are accepted, as a primary or as a fallback, and Twilio answers
each with its documented error (tests/integration/local/test_provider_reports.py sends them). In
production no target starts with any of Twilio's test-credential senders."""

from __future__ import annotations

import pytest

from signup_verification.config import load
from signup_verification.platform.errors import ConfigError
from signup_verification.verifications import abuse
from signup_verification.verifications.config import TWILIO_MAGIC_SENDERS, TWILIO_TEST_SENDER
from support.paths import TEST_TOKEN_KEYS
from support.signup_requests import post_create

MAGIC = sorted(abuse.TWILIO_TEST_RECIPIENTS)


def _post(client, body: dict, key: str):
    return post_create(client, {"account_id": "acct-magic", **body}, key)


@pytest.mark.parametrize("number", MAGIC)
def test_magic_numbers_are_refused_without_twilio_test_credentials(create_app, number):
    answer = _post(create_app(TWILIO_FROM="+14155550199"), {"channel": "sms", "destination": number}, "k")
    assert answer.status_code == 422 and answer.get_json()["type"].endswith("/sms-number-type-not-allowed")


@pytest.mark.parametrize("number", MAGIC)
def test_magic_numbers_are_accepted_with_twilio_test_credentials(create_app, number):
    client = create_app(
        TWILIO_FROM=TWILIO_TEST_SENDER, RATE_LIMIT_PREFIX_PER_HOUR="100", RATE_LIMIT_SPACING_SECONDS="0"
    )
    assert _post(client, {"channel": "sms", "destination": number}, f"p-{number}").status_code == 201
    fallback = {"channel": "sms", "destination": number, "after_seconds": 0}
    body = {"channel": "email", "destination": f"m{number[-1]}@example.com", "fallback": fallback}
    assert _post(client, body, f"f-{number}").status_code == 201


def test_other_personal_numbers_stay_refused_on_test_credentials(create_app):
    client = create_app(TWILIO_FROM=TWILIO_TEST_SENDER)
    answer = _post(client, {"channel": "sms", "destination": "+15005550006"}, "k")  # the sender, not a test `To`
    assert answer.status_code == 422


def test_the_fake_twilio_answers_exactly_these_numbers_with_their_errors():
    from signup_verification.local import fake_twilio

    assert set(fake_twilio.MAGIC_NUMBERS) == abuse.TWILIO_TEST_RECIPIENTS
    assert TWILIO_TEST_SENDER not in fake_twilio.MAGIC_SENDERS


@pytest.mark.parametrize("sender", sorted(TWILIO_MAGIC_SENDERS))
@pytest.mark.parametrize(
    "target", ["create_verification", "dispatch", "reconcile", "confirm_verification", "status", None]
)
def test_production_refuses_to_start_with_a_twilio_test_number_as_the_sender(sender, target):
    env = {
        "ENVIRONMENT": "production",
        "TWILIO_FROM": sender,
        "SMS_ALLOWED_COUNTRIES": "US",
        "TOKEN_KEYS": TEST_TOKEN_KEYS,
    }
    if target:
        env["FUNCTION_TARGET"] = target
    with pytest.raises(ConfigError, match=rf"TWILIO_FROM=\{sender} is one of Twilio's test-credential numbers"):
        load(env)
    assert not load({**env, "TWILIO_FROM": "+14155550199"}).create.abuse.twilio_test_numbers
    assert load({"TWILIO_FROM": sender}).channels.twilio.sender == sender  # outside production: the sandbox


def test_production_with_twilio_test_numbers_allowed_by_type_still_cannot_start():
    """Even with personal numbers allowed (the NANP 500 range), production never runs on the test sender."""
    with pytest.raises(ConfigError):
        load(
            {
                "ENVIRONMENT": "production",
                "TWILIO_FROM": TWILIO_TEST_SENDER,
                "SMS_ALLOWED_NUMBER_TYPES": "personal_number",
            }
        )


def test_the_fake_twilio_answers_exactly_the_magic_senders_production_refuses():
    from signup_verification.local import fake_twilio

    assert set(fake_twilio.MAGIC_SENDERS) | {TWILIO_TEST_SENDER} == TWILIO_MAGIC_SENDERS
