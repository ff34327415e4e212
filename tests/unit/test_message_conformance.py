"""Message correctness: RFC 2045/5322 conformance of every email
template x locale, plural forms per locale, PRODUCT_NAME checked against the SMS segment budget at
start-up, and one SMS segment counter for the dispatcher and the local mailbox."""

from __future__ import annotations

import base64
import email
import email.policy
import re
from datetime import UTC, datetime, timedelta

import pytest

from signup_verification import cli, runtime
from signup_verification.config import ConfigError, load
from signup_verification.delivery import mime, sms, templates
from signup_verification.delivery.config import MessageConfig
from signup_verification.delivery.messages import Renderer, sample_intent
from signup_verification.delivery.sms import check_sms_budget
from signup_verification.local.mailbox import sms_segments
from signup_verification.outbox.transitions import BegunAttempt
from signup_verification.verifications.tokens import Keyring
from support.paths import TEST_TOKEN_KEYS

KEYRING = Keyring.parse(TEST_TOKEN_KEYS)
NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
ALL = [
    (f"{purpose}/{version}", locale)
    for purpose in templates.purposes()
    for version in templates.versions(purpose)
    for locale in templates.locales(f"{purpose}/{version}")
]
ENV = {"TOKEN_KEYS": TEST_TOKEN_KEYS}


def render(channel, version_ref="signup/v1", locale="en", *, left=timedelta(minutes=10), to=None, settings=None):
    settings = settings or MessageConfig(email_from="Signup <no-reply@mail.example.org>")
    to = to or ("ada@example.com" if channel == "email" else "+14155550100")
    intent = sample_intent(channel, version_ref, locale, destination=to, key_id="test-k1", expires_at=NOW + left)
    return Renderer(settings, KEYRING).render(intent, BegunAttempt(1, "1:1", 1), NOW)


def bare_lf(raw: bytes) -> bool:
    return b"\n" in raw.replace(b"\r\n", b"")


@pytest.mark.parametrize("version_ref,locale", ALL)
def test_every_email_has_crlf_line_breaks_and_a_numeric_utc_date(version_ref, locale):
    raw = render("email", version_ref, locale).mime()
    assert not bare_lf(raw) and not raw.endswith(b"\n\n")
    # The raw header: the stdlib parser would re-format the date and hide an obsolete 'GMT'.
    assert re.search(rb"\r\nDate: \w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} \+0000\r\n", raw)
    parsed = email.message_from_bytes(raw, policy=email.policy.default)
    for part in parsed.iter_parts():
        if part["Content-Transfer-Encoding"] == "base64":  # the encoded lines and the text inside them
            assert not bare_lf(part.get_payload().encode()) and not bare_lf(base64.b64decode(part.get_payload()))


def test_a_japanese_body_is_base64_with_crlf():
    raw = render("email", "signup/v1", "ja").mime()
    parsed = email.message_from_bytes(raw, policy=email.policy.default)
    assert [p["Content-Transfer-Encoding"] for p in parsed.iter_parts()] == ["base64", "base64"]
    assert not bare_lf(raw)


def test_a_long_ascii_subject_is_folded_not_encoded():
    subject = "Confirm your email address for Northwind Traders International Holdings Ltd"
    assert len(subject) > 69
    raw = mime.build(
        sender="a@example.com", to="b@example.com", subject=subject, message_id="<1@x>", text="t", html="<p>t</p>"
    )
    head = raw.split(b"\r\n\r\n")[0]
    assert b"=?" not in head and subject.encode() in head.replace(b"\r\n ", b" ")
    assert email.message_from_bytes(raw, policy=email.policy.default)["Subject"] == subject


def test_a_non_ascii_address_gets_raw_utf8_headers():
    raw = render("email", to="josé@example.com").mime()
    assert "To: josé@example.com".encode() in raw and not bare_lf(raw)


@pytest.mark.parametrize(
    "left,text",
    [
        (timedelta(seconds=61), "expires in 1 minute."),
        (timedelta(seconds=89), "expires in 1 minute."),
        (timedelta(seconds=90), "expires in 2 minutes."),
        (timedelta(minutes=10, seconds=5), "expires in 10 minutes."),
        (timedelta(minutes=9, seconds=59), "expires in 10 minutes."),  # a fresh 10-minute link, a second later
    ],
)
def test_english_minutes_take_the_plural_form_for_the_count(left, text):
    content = render("email", left=left)
    assert text in content.text and text in content.html and "1 minutes" not in content.text + content.html


def test_a_fresh_ten_minute_code_says_ten_minutes():
    assert "It expires in 10 min." in render("sms", left=timedelta(minutes=9, seconds=58)).body


def test_japanese_has_one_form_for_every_count():
    assert "1 分後" in render("email", locale="ja", left=timedelta(seconds=89)).text
    assert "5 分後" in render("email", locale="ja", left=timedelta(minutes=5, seconds=1)).text


def test_every_template_locale_has_a_plural_rule():
    for _, locale in ALL:
        assert templates.plural_for(locale)(1, one="one", other="other") in ("one", "other")
    with pytest.raises(templates.UnknownTemplate):
        templates.plural_for("xx")


def test_a_product_name_that_breaks_the_sms_budget_refuses_to_start(monkeypatch, capsys):
    with pytest.raises(ConfigError) as caught:
        check_sms_budget(MessageConfig(product_name="Acme™"), 600)
    message = str(caught.value)
    assert "PRODUCT_NAME='Acme™'" in message and "signup/v1/en" in message and "'™'" in message
    with pytest.raises(ConfigError, match="PRODUCT_NAME"):
        check_sms_budget(MessageConfig(product_name="Northwind Traders International Holdings Limited Group"), 600)
    check_sms_budget(MessageConfig(product_name="Acme"), 600)
    # At start-up: a function instance, and verifyctl (one line, exit 1).
    for name, value in {**ENV, "PRODUCT_NAME": "Acme™"}.items():
        monkeypatch.setenv(name, value)
    runtime.reset()
    with pytest.raises(ConfigError, match="PRODUCT_NAME"):
        runtime.get_runtime()
    runtime.reset()
    assert cli.main(["new-key"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("verifyctl: PRODUCT_NAME='Acme™'") and "\n" not in err


def test_a_localhost_sender_is_refused_in_production():
    production = {**ENV, "ENVIRONMENT": "production", "EMAIL_TRANSPORT": "smtp"}
    with pytest.raises(ConfigError, match="EMAIL_FROM"):
        load(production)  # the default sender is @localhost
    with pytest.raises(ConfigError, match="EMAIL_FROM"):
        load({**production, "EMAIL_TRANSPORT": "sendgrid", "EMAIL_FROM": "Signup <no-reply@LOCALHOST.>"})
    assert load({**production, "EMAIL_FROM": "no-reply@example.org"}).is_production
    assert load({**ENV, "ENVIRONMENT": "production"}).is_production  # sends no email: `verifyctl migrate`
    assert (
        load({**ENV, "EMAIL_FROM": "no-reply@localhost"}).dispatch.messages.email_from == "no-reply@localhost"
    )  # local: fine


@pytest.mark.parametrize(
    "body", ["Café: your code is 123456", "a" * 150 + "€€€€€€", "naïve", "あ" * 71, "😀" * 36, "plain ascii"]
)
def test_the_mailbox_counts_segments_as_the_dispatcher_does(body):
    assert sms_segments(body) == sms.encode_info(body).segments
