"""SendGrid and Twilio adapters against local servers that answer as those APIs do:
success, every documented error, 429 with Retry-After, 5xx, slow answers, resets after accepting."""

from __future__ import annotations

import time

import pytest

from signup_verification.delivery.channels.http import HttpClient
from signup_verification.delivery.channels.sendgrid import SendGridChannel
from support.channels import PHONE, render, sendgrid_channel, soon, twilio_channel
from support.fakes.http import Answer, FakeSendGrid
from support.fakes.smtp import free_port
from support.fakes.twilio import FakeTwilio


@pytest.fixture
def sendgrid():
    with FakeSendGrid() as fake:
        yield fake


@pytest.fixture
def twilio():
    with FakeTwilio() as fake:
        yield fake


# -- SendGrid ---------------------------------------------------------------------------------------
def test_sendgrid_accepts_with_headers_and_both_parts(sendgrid):
    content = render("email", "ada@example.com")
    result = sendgrid_channel(sendgrid).send(content, soon())
    assert result.outcome == "accepted" and result.provider_ref
    [delivery] = sendgrid.deliveries
    request = delivery.request
    assert delivery.destination == "ada@example.com"
    assert request["from"] == {"email": "no-reply@example.org", "name": "Signup"}
    assert [c["type"] for c in request["content"]] == ["text/plain", "text/html"]
    assert request["headers"]["Message-ID"] == content.message_id
    assert request["headers"]["Auto-Submitted"] == "auto-generated"
    assert request["headers"]["Content-Language"] == "en"
    assert request["custom_args"] == {"intent_id": "1", "attempt_id": "1:1"}
    assert delivery.headers["Accept"] == "application/json"  # the official client's; a 406 fails every email


@pytest.mark.parametrize(
    "answer,outcome,error_class,retry_after",
    [
        (
            Answer(
                400,
                {
                    "errors": [
                        {"field": "personalizations.0.to.0.email", "message": "Does not contain a valid address."}
                    ]
                },
            ),
            "failed",
            "invalid_destination",
            None,
        ),
        (
            Answer(400, {"errors": [{"field": "content.0.value", "message": "invalid"}]}),
            "failed",
            "message_rejected",
            None,
        ),
        (
            Answer(403, {"errors": [{"message": "The from address does not match a verified Sender Identity."}]}),
            "failed",
            "configuration",
            None,
        ),
        (Answer(413, {"errors": [{"message": "too large"}]}), "failed", "message_rejected", None),
        (
            Answer(429, {"errors": [{"message": "too many requests"}]}, {"Retry-After": "30"}),
            "retryable",
            "rate_limited",
            30.0,
        ),
        # 5xx: SendGrid does not say the message was not processed (docs/channels.md)
        (Answer(500, {"errors": [{"message": "internal"}]}), "ambiguous", "provider_5xx", None),
        (Answer(502, None), "ambiguous", "provider_5xx", None),
        (Answer(503, None, {"Retry-After": "5"}), "ambiguous", "provider_5xx", None),
        (Answer(504), "ambiguous", "provider_5xx", None),
        # the sender, the request's form: every email would be refused
        (
            Answer(
                400,
                {"errors": [{"field": "from.email", "message": "The from email does not contain a valid address."}]},
            ),
            "failed",
            "configuration",
            None,
        ),
        (
            Answer(
                400,
                {"errors": [{"field": None, "message": "The from address does not match a verified Sender Identity."}]},
            ),
            "failed",
            "configuration",
            None,
        ),
        (Answer(406, {"errors": [{"message": "Not Acceptable"}]}), "failed", "configuration", None),
        (Answer(415, {"errors": [{"message": "Unsupported Media Type"}]}), "failed", "configuration", None),
        (
            Answer(
                403,
                {
                    "errors": [
                        {
                            "field": None,
                            "message": "You have been temporarily blocked from making requests "
                            "due to repeated bad requests.",
                        }
                    ]
                },
            ),
            "retryable",
            "provider_blocked",
            1800.0,
        ),
    ],
)
def test_sendgrid_error_answers(sendgrid, answer, outcome, error_class, retry_after):
    sendgrid.script(answer)
    result = sendgrid_channel(sendgrid).send(render("email", "ada@example.com"), soon())
    assert (result.outcome, result.error_class, result.retry_after) == (outcome, error_class, retry_after)
    assert "ada@example.com" not in (result.detail or "")


def test_sendgrid_rate_limit_reset_header(sendgrid):
    sendgrid.script(Answer(429, {"errors": []}, {"X-RateLimit-Reset": str(int(time.time()) + 90)}))
    result = sendgrid_channel(sendgrid).send(render("email", "ada@example.com"), soon())
    assert result.outcome == "retryable" and 80 <= result.retry_after <= 91


def test_sendgrid_bad_key_is_a_configuration_error(sendgrid):
    result = sendgrid_channel(sendgrid, key="SG.wrong").send(render("email", "ada@example.com"), soon())
    assert (result.outcome, result.error_class) == ("failed", "configuration") and "401" in result.detail
    assert "SG.wrong" not in result.detail and sendgrid.deliveries == []


def test_sendgrid_slow_answer_after_the_request_is_ambiguous(sendgrid):
    sendgrid.script(Answer(delay=1.0))
    started = time.monotonic()
    result = sendgrid_channel(sendgrid, timeout=0.3).send(render("email", "ada@example.com"), soon())
    assert (result.outcome, result.error_class) == ("ambiguous", "timeout_after_send")
    assert time.monotonic() - started < 0.9 and len(sendgrid.deliveries) == 1


def test_sendgrid_reset_after_accepting_is_ambiguous(sendgrid):
    sendgrid.script(Answer(reset=True))
    result = sendgrid_channel(sendgrid).send(render("email", "ada@example.com"), soon())
    assert (result.outcome, result.error_class) == ("ambiguous", "connection_reset")
    assert len(sendgrid.deliveries) == 1


def test_unreachable_api_is_retryable():
    channel = SendGridChannel("k", f"http://127.0.0.1:{free_port()}/v3/mail/send", HttpClient(timeout=1))
    result = channel.send(render("email", "ada@example.com"), soon())
    assert (result.outcome, result.error_class) == ("retryable", "connect")


def test_no_time_left_is_not_sent(sendgrid):
    result = sendgrid_channel(sendgrid).send(render("email", "ada@example.com"), time.monotonic() - 1)
    assert (result.outcome, result.error_class) == ("retryable", "deadline") and sendgrid.requests == 0


# -- Twilio -----------------------------------------------------------------------------------------------
def test_twilio_accepts_and_returns_the_message_sid(twilio):
    content = render("sms", PHONE)
    result = twilio_channel(twilio).send(content, soon())
    assert result.outcome == "accepted" and result.provider_ref.startswith("SM")
    [delivery] = twilio.deliveries
    assert delivery.request == {"To": PHONE, "From": "+15005550006", "Body": content.body}


def test_twilio_messaging_service_sender(twilio):
    twilio_channel(twilio, sender="MG0123").send(render("sms", PHONE), soon())
    assert twilio.deliveries[0].request["MessagingServiceSid"] == "MG0123"


@pytest.mark.parametrize(
    "answer,outcome,error_class",
    [
        (
            FakeTwilio.error(400, 21211, f"The 'To' number {PHONE} is not a valid phone number."),
            "failed",
            "invalid_destination",
        ),
        (FakeTwilio.error(400, 21610, "Attempt to send to unsubscribed recipient"), "failed", "unsubscribed"),
        (FakeTwilio.error(400, 21614, f"'To' number {PHONE} is not a valid mobile number"), "failed", "not_mobile"),
        (FakeTwilio.error(400, 21635, "landline"), "failed", "not_mobile"),
        (
            FakeTwilio.error(
                400, 21608, "The number is unverified. Trial accounts cannot send messages to unverified numbers"
            ),
            "failed",
            "sender_misconfigured",  # a route fault: never the channel's configuration
        ),
        (
            FakeTwilio.error(400, 21606, "The From phone number is not a valid, SMS-capable number"),
            "failed",
            "sender_misconfigured",
        ),
        (FakeTwilio.error(400, 21661, "'From' number is not SMS-capable"), "failed", "configuration"),
        (
            FakeTwilio.error(400, 21408, "Permission to send an SMS has not been enabled for the region"),
            "failed",
            "region_not_permitted",
        ),
        (FakeTwilio.error(400, 21604, "A 'To' phone number is required."), "failed", "message_rejected"),
        (
            FakeTwilio.error(400, 21212, "The 'From' number +15005550006 is not a valid phone number"),
            "failed",
            "configuration",
        ),
        (FakeTwilio.error(400, 21999, "something else"), "failed", "unknown"),
        (FakeTwilio.error(429, 20429, "Too Many Requests", headers={"Retry-After": "12"}), "retryable", "rate_limited"),
        (FakeTwilio.error(500, 20500, "Internal Server Error"), "ambiguous", "provider_5xx"),
        # Twilio's 503 may have created the message: ambiguous, and its Retry-After is kept for the hold
        (
            FakeTwilio.error(503, 20503, "Service Unavailable", headers={"Retry-After": "12"}),
            "ambiguous",
            "provider_5xx",
        ),
    ],
)
def test_twilio_error_answers(twilio, answer, outcome, error_class):
    twilio.script(answer)
    result = twilio_channel(twilio).send(render("sms", PHONE), soon())
    assert (result.outcome, result.error_class) == (outcome, error_class)
    assert PHONE not in result.detail and PHONE[1:] not in result.detail  # Twilio echoes the number
    if error_class == "rate_limited" or answer.status == 503:
        assert result.retry_after == 12.0
    assert (result.verdict is not None) == (outcome == "failed")


def test_twilio_bad_credentials_is_error_20003(twilio):
    result = twilio_channel(twilio, token="wrong").send(render("sms", PHONE), soon())
    assert (result.outcome, result.error_class) == ("failed", "configuration") and "20003" in result.detail


def test_twilio_slow_answer_and_reset_are_ambiguous(twilio):
    twilio.script(Answer(delay=1.0), Answer(reset=True))
    channel = twilio_channel(twilio, timeout=0.3)
    assert channel.send(render("sms", PHONE), soon()).error_class == "timeout_after_send"
    assert channel.send(render("sms", PHONE), soon()).error_class == "connection_reset"
    assert len(twilio.deliveries) == 2  # both reached the provider: a resend would duplicate


def test_twilio_keeps_connections_alive(twilio):
    channel = twilio_channel(twilio)
    for i in range(5):
        assert channel.send(render("sms", PHONE, intent_id=i + 1), soon()).outcome == "accepted"
    assert twilio.requests == 5 and len(twilio.connections) == 1


def test_a_quoted_fragment_of_the_secret_is_forgotten_too(twilio):
    """A provider that quotes part of what we sent (a content filter echoing the start of a link)
    must not leave a piece of the secret in the stored text: scrubbed by the known secret, not by a
    token-shaped pattern (a 20-character fragment is no 32-character token)."""
    from signup_verification.delivery.channels.base import SendResult, forget
    from signup_verification.platform.redaction import forget_secret

    secret = "Qm9vbGVhbi1zZWNyZXQtdG9rZW4tZm9yLXRlc3RzLTEyMw"
    fragment = secret[5:25]
    result = forget(SendResult.failed("rejected", f"filtered: '{fragment}...' looks like spam", None), secret)  # type: ignore[arg-type]
    assert fragment not in (result.detail or "") and "[secret]" in (result.detail or "")
    assert forget_secret("queue 4069127A943 ok", secret) == "queue 4069127A943 ok"  # nothing of it, nothing changed
    assert forget_secret("your code 123456 was refused", "123456") == "your code [secret] was refused"
