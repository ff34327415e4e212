"""Twilio's magic test numbers at create: refused by type (NANP 500 numbers are personal numbers)
unless the configured sender is Twilio's test sender, +15005550006, which only Twilio's test
credentials can send from; then they are accepted, as a primary or as a fallback, and Twilio answers
each with its documented error (tests/integration/local/test_provider_reports.py sends them)."""

from __future__ import annotations

import pytest

from signup_verification.verifications import abuse
from signup_verification.verifications.config import TWILIO_TEST_SENDER

MAGIC = sorted(abuse.TWILIO_TEST_RECIPIENTS)


@pytest.fixture
def create(configured_app):
    return lambda **settings: configured_app("create_verification", **settings)


def _post(client, body: dict, key: str):
    return client.post("/", json={"account_id": "acct-magic", **body}, headers={"Idempotency-Key": key})


@pytest.mark.parametrize("number", MAGIC)
def test_magic_numbers_are_refused_without_twilio_test_credentials(create, number):
    answer = _post(create(TWILIO_FROM="+14155550199"), {"channel": "sms", "destination": number}, "k")
    assert answer.status_code == 422 and answer.get_json()["type"].endswith("/sms-number-type-not-allowed")


@pytest.mark.parametrize("number", MAGIC)
def test_magic_numbers_are_accepted_with_twilio_test_credentials(create, number):
    client = create(TWILIO_FROM=TWILIO_TEST_SENDER, RATE_LIMIT_PREFIX_PER_HOUR="100", RATE_LIMIT_SPACING_SECONDS="0")
    assert _post(client, {"channel": "sms", "destination": number}, f"p-{number}").status_code == 201
    fallback = {"channel": "sms", "destination": number, "after_seconds": 0}
    body = {"channel": "email", "destination": f"m{number[-1]}@example.com", "fallback": fallback}
    assert _post(client, body, f"f-{number}").status_code == 201


def test_other_personal_numbers_stay_refused_on_test_credentials(create):
    client = create(TWILIO_FROM=TWILIO_TEST_SENDER)
    answer = _post(client, {"channel": "sms", "destination": "+15005550006"}, "k")  # the sender, not a test `To`
    assert answer.status_code == 422


def test_the_fake_twilio_answers_exactly_these_numbers_with_their_errors():
    from signup_verification.local import fake_twilio

    assert set(fake_twilio.MAGIC_NUMBERS) == abuse.TWILIO_TEST_RECIPIENTS
    assert TWILIO_TEST_SENDER not in fake_twilio.MAGIC_SENDERS
