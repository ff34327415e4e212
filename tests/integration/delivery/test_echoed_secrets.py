"""A mail server that quotes the message's first URL in its rejection: the live
link token must reach neither delivery_attempts.error_detail, delivery_intents.last_error nor a log."""

from __future__ import annotations

import logging

import pytest

from signup_verification.platform.redaction import scrub
from support.dispatch import KEYRING, provider_settings, run_dispatch
from support.factories import created
from support.fakes.smtp import SmtpBehaviour
from support.fakes.twilio import FakeTwilio


def test_an_echoed_url_is_scrubbed_before_it_is_stored_or_logged(db, smtp, caplog):
    smtp.behaviour = SmtpBehaviour(echo_first_url=True)
    settings = provider_settings(smtp)
    vid = created(db, "ada@example.com", config=settings.create)
    row = db.one("SELECT id, token_nonce FROM verifications WHERE id = :id", id=vid)
    token = KEYRING.primary.link_token(row["id"], bytes(row["token_nonce"]))
    with caplog.at_level(logging.DEBUG):
        report = run_dispatch(db, settings)
    assert report.failed + report.retryable == 1  # the server really refused, quoting the link
    stored = [r[0] for r in db.run("SELECT error_detail FROM delivery_attempts WHERE error_detail IS NOT NULL")]
    stored += [r[0] for r in db.run("SELECT last_error FROM delivery_intents")]
    assert stored and any("URL blocked by policy" in s for s in stored)
    ours = [
        r.getMessage() + " " + str(getattr(r, "json_fields", ""))
        for r in caplog.records
        if r.name.startswith("signup_verification")
    ]  # the fake server's own DEBUG log prints the mail
    for text in stored + ours:
        assert token not in text and "app.example.org/confirm" not in text


def test_an_sms_code_echoed_by_twilio_is_not_stored_or_logged(db, caplog):
    """Shape rules cannot catch a 6-digit code (it looks like any number in a message): the adapter
    removes the code it rendered, by value, before the text is stored or logged."""
    with FakeTwilio() as twilio:
        settings = provider_settings(twilio=twilio)
        vid = created(db, "+14155550100", config=settings.create)
        row = db.one("SELECT id, token_nonce FROM verifications WHERE id = :id", id=vid)
        code = KEYRING.primary.sms_code(row["id"], bytes(row["token_nonce"]), 6)
        twilio.script(FakeTwilio.error(400, 30007, f"Message filtered: 'Your code is {code}' [{code}]"))
        with caplog.at_level(logging.DEBUG):
            report = run_dispatch(db, settings)
    assert report.failed + report.retryable == 1
    stored = [r[0] for r in db.run("SELECT error_detail FROM delivery_attempts WHERE error_detail IS NOT NULL")]
    stored += [r[0] for r in db.run("SELECT last_error FROM delivery_intents")]
    assert stored and any("Message filtered" in s and "[secret]" in s for s in stored)
    logged = [r.getMessage() + " " + str(getattr(r, "json_fields", "")) for r in caplog.records]
    for text in stored + logged:
        assert code not in text


@pytest.mark.parametrize(
    "text",
    [
        "554 5.7.1 URL blocked by policy: https://verify.example.com/confirm?token=abc",
        "rejected: token=abcdef&x=1",
        "content code=123456 flagged",
        "found " + "A" * 43 + " in body",
    ],
)
def test_scrub_removes_urls_secret_params_and_token_shapes(text):
    cleaned = scrub(text)
    assert "example.com" not in cleaned and "abcdef" not in cleaned and "123456" not in cleaned
    assert "A" * 32 not in cleaned


def test_scrub_keeps_what_an_operator_needs():
    assert scrub("550 5.1.1 mailbox unavailable", numbers=False) == "550 5.1.1 mailbox unavailable"
