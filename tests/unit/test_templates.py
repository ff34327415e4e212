"""Templates and rendering: every template x locale renders to a well-formed, standard-conformant
message (CRLF, +0000 dates, plurals), SMS encoding and segments are counted as carriers count them."""

from __future__ import annotations

import email
import email.policy
from datetime import UTC, datetime, timedelta

import pytest

from signup_verification.delivery import mime, sms, templates
from signup_verification.delivery.config import MessageConfig
from signup_verification.delivery.messages import Renderer, RenderError, sample_intent
from signup_verification.outbox.transitions import BegunAttempt
from signup_verification.platform import timestamps
from signup_verification.platform.errors import ConfigError
from signup_verification.verifications.tokens import Keyring
from support.paths import TEST_TOKEN_KEYS

KEYRING = Keyring.parse(TEST_TOKEN_KEYS)
NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
ALL = [
    (purpose, f"{purpose}/{version}", locale)
    for purpose in templates.purposes()
    for version in templates.versions(purpose)
    for locale in templates.locales(f"{purpose}/{version}")
]


def render(channel, version_ref, locale, *, settings=None, attempt=1, destination=None, intent_id=7, minutes=10):
    settings = settings or MessageConfig(
        email_from="Signup <no-reply@mail.example.org>", link_base="https://app.example.org/verify"
    )
    destination = destination or ("ada@example.com" if channel == "email" else "+14155550100")
    intent = sample_intent(
        channel,
        version_ref,
        locale,
        destination=destination,
        key_id="test-k1",
        expires_at=NOW + timedelta(minutes=minutes),
        intent_id=intent_id,
    )
    content = Renderer(settings, KEYRING).render(
        intent, BegunAttempt(intent.id, f"{intent.id}:{attempt}", attempt), NOW
    )
    return intent, content


def test_there_is_an_english_and_a_non_latin_locale():
    assert {"en", "ja"} <= {locale for _, _, locale in ALL}


@pytest.mark.parametrize("purpose,version_ref,locale", ALL)
def test_email_is_multipart_text_and_html_with_stable_headers(purpose, version_ref, locale):
    intent, content = render("email", version_ref, locale)
    token = KEYRING.get("test-k1").link(intent.verification_id, intent.token_nonce)  # id, then token
    link = f"https://app.example.org/verify?token={token}"
    parsed = email.message_from_bytes(content.mime(), policy=email.policy.default)
    assert parsed.get_content_type() == "multipart/alternative"
    assert [p.get_content_type() for p in parsed.iter_parts()] == ["text/plain", "text/html"]
    text = parsed.get_body(("plain",)).get_content()
    html = parsed.get_body(("html",)).get_content()
    assert link in text and f'href="{link}"' in html
    assert parsed["Subject"] == content.subject and content.subject
    assert parsed["Auto-Submitted"] == "auto-generated"
    assert parsed["To"] == "ada@example.com"
    assert parsed["Message-ID"] == f"<{intent.id}.{intent.verification_id}@mail.example.org>"
    assert "10" in text  # minutes left, as the message states them
    # Every attempt of one intent carries the same Message-ID (a client collapses a duplicate).
    _, second = render("email", version_ref, locale, attempt=2)
    assert second.message_id == content.message_id
    assert email.message_from_bytes(second.mime(), policy=email.policy.default)["X-Delivery-Attempt"] == "7:2"


def test_html_part_escapes_the_link_and_text_part_keeps_it():
    settings = MessageConfig(link_base="https://app.example.org/verify?src=mail&lang=en")
    intent, content = render("email", "signup/v1", "en", settings=settings)
    assert "?src=mail&lang=en&token=" in content.text
    assert "?src=mail&amp;lang=en&amp;token=" in content.html
    assert "&lang" not in content.html


def test_product_name_is_escaped_in_html():
    _, content = render("email", "signup/v1", "en", settings=MessageConfig(product_name="Tom & <Jerry>"))
    assert "Tom &amp; &lt;Jerry&gt;" in content.html and "<Jerry>" not in content.html
    assert "Tom & <Jerry>" in content.text


# The longest confirm host a deployment gets without a domain of its own (a Cloud Run service URL of the
# deterministic form), and an app hash: the autofill lines at their longest.
LONG_BASE = "https://signup-verify-confirm-123456789012.us-central1.run.app/"
APP_HASH = "FA+9qCX9VSu"


@pytest.mark.parametrize("purpose,version_ref,locale", ALL)
@pytest.mark.parametrize("product", ["Example", "Northwind Traders"])
@pytest.mark.parametrize("autofill", [{}, {"link_base": LONG_BASE, "sms_app_hash": APP_HASH}], ids=["short", "long"])
def test_every_sms_template_stays_within_its_segment_budget(purpose, version_ref, locale, product, autofill):
    settings = MessageConfig(product_name=product, code_digits=8, **autofill)  # the longest code allowed in practice
    intent, content = render("sms", version_ref, locale, settings=settings)
    budget = templates.load(version_ref, locale).sms_max_segments
    assert 1 <= content.segments <= budget, (content.encoding, len(content.body))
    code = KEYRING.get("test-k1").sms_code(intent.verification_id, intent.token_nonce, 8)
    assert code in content.body
    expected = "GSM-7" if sms.is_gsm7(content.body) else "UCS-2"
    assert content.encoding == expected
    if locale == "ja":
        assert content.encoding == "UCS-2"
    if locale == "en":
        assert content.encoding == "GSM-7", sms.non_gsm_characters(content.body)


@pytest.mark.parametrize("locale", templates.locales(templates.current_version("signup")))
@pytest.mark.parametrize("app_hash", [None, APP_HASH])
def test_the_sms_ends_with_the_origin_bound_code_line_and_the_app_hash_before_it(locale, app_hash):
    settings = MessageConfig(link_base="https://Verify.Example.org:8443/confirm?src=sms", sms_app_hash=app_hash)
    intent, content = render("sms", templates.current_version("signup"), locale, settings=settings)
    code = KEYRING.get("test-k1").sms_code(intent.verification_id, intent.token_nonce, 6)
    lines = content.body.split("\n")
    assert lines[-1] == f"@verify.example.org #{code}"  # the host alone, as WebOTP and Safari read it
    assert lines[-2] == app_hash if app_hash else APP_HASH not in content.body
    assert code in lines[0]  # and the code in the words a person reads


def test_a_host_that_pushes_an_sms_past_its_budget_refuses_to_start():
    long_host = "https://" + "x" * 150 + ".example.org/"
    with pytest.raises(ConfigError) as refused:
        sms.check_sms_budget(MessageConfig(link_base=long_host, sms_app_hash=APP_HASH), 600)
    assert "VERIFY_LINK_BASE's host" in str(refused.value) and "SMS_APP_HASH" in str(refused.value)
    sms.check_sms_budget(
        MessageConfig(link_base=LONG_BASE, sms_app_hash=APP_HASH, product_name="Northwind Traders"), 600
    )


@pytest.mark.parametrize(
    "text,encoding,units,segments",
    [
        ("", "GSM-7", 0, 0),
        ("a" * 160, "GSM-7", 160, 1),
        ("a" * 161, "GSM-7", 161, 2),
        ("a" * 306, "GSM-7", 306, 2),
        ("a" * 307, "GSM-7", 307, 3),
        ("€" * 80, "GSM-7", 160, 1),  # extension characters cost two septets
        ("€" * 81, "GSM-7", 162, 2),
        ("a" * 152 + "{" + "a" * 10, "GSM-7", 164, 2),  # '{' does not fit at septet 153: it opens part 2
        ("a" * 152 + "[" + "a" * 153, "GSM-7", 307, 3),
        ("ÄÖÑÜäöñüàéèùìòÇØøÅåÆæßÉ§¿¡£¥", "GSM-7", 28, 1),  # accented letters the GSM alphabet has
        ("naïve", "UCS-2", 5, 1),  # ... and one it has not
        ("a" * 159 + "’", "UCS-2", 160, 3),  # one curly quote switches the whole message
        ("a" * 70, "GSM-7", 70, 1),
        ("あ" * 70, "UCS-2", 70, 1),
        ("あ" * 71, "UCS-2", 71, 2),
        ("あ" * 134, "UCS-2", 134, 2),
        ("あ" * 135, "UCS-2", 135, 3),
        ("😀" * 35, "UCS-2", 70, 1),  # a surrogate pair counts two
        ("a" * 66 + "😀" + "a", "UCS-2", 69, 1),
        ("a" * 66 + "😀" + "a" * 4, "UCS-2", 72, 2),
    ],
)
def test_sms_encoding_and_segments(text, encoding, units, segments):
    info = sms.encode_info(text)
    assert (info.name, info.units, info.segments) == (encoding, units, segments)


def test_gsm7_tables_have_the_standard_sizes():
    assert len(sms.GSM7_BASIC) == 127  # 128 codes, one of them the escape
    assert len(sms.GSM7_EXTENSION) == 10


def test_reprs_never_show_the_secret_or_the_destination():
    intent, email_content = render("email", "signup/v1", "en")
    _, sms_content = render("sms", "signup/v1", "en")
    key = KEYRING.get("test-k1")
    for content, secret in (
        (email_content, key.link_token(intent.verification_id, intent.token_nonce)),
        (sms_content, key.sms_code(intent.verification_id, intent.token_nonce, 6)),
    ):
        shown = repr(content) + str(content)
        assert secret not in shown and content.to not in shown and "***" in shown
    assert "token_nonce" not in repr(intent) and intent.destination not in repr(intent)


def test_a_missing_key_is_a_configuration_error_without_the_secret():
    intent = sample_intent(
        "email", "signup/v1", "en", destination="a@example.com", key_id="gone", expires_at=NOW + timedelta(minutes=5)
    )
    with pytest.raises(RenderError) as caught:
        Renderer(MessageConfig(), KEYRING).render(intent, BegunAttempt(1, "1:1", 1), NOW)
    assert caught.value.error_class == "configuration" and "gone" in caught.value.detail


def test_mime_refuses_header_injection_and_encodes_non_ascii():
    with pytest.raises(mime.HeaderInjection):
        mime.build(
            sender="a@example.com",
            to="b@example.com\r\nBcc: x@example.com",
            subject="s",
            message_id="<1@x>",
            text="t",
            html="<p>t</p>",
        )
    subject = " ".join(["確認メールアドレス"] * 12)  # long: folded into several encoded-words
    raw = mime.build(
        sender="Ünï <a@example.com>",
        to="b@example.com",
        subject=subject,
        message_id="<1@x>",
        text="日本語\n" + "x" * 2000,
        html="<p>ok</p>",
    )
    assert all(len(line) <= 998 for line in raw.split(b"\r\n"))
    assert raw.isascii()
    parsed = email.message_from_bytes(raw, policy=email.policy.default)
    assert parsed["Subject"] == subject
    assert str(parsed["From"].addresses[0].display_name) == "Ünï"
    assert parsed.get_body(("plain",)).get_content().replace("\r\n", "\n").startswith("日本語\n")


@pytest.mark.parametrize(
    "left,shown",
    [
        (timedelta(minutes=10), 10),
        (timedelta(minutes=9, seconds=59, milliseconds=500), 10),  # a fresh 10-minute link, rendered at once
        (timedelta(minutes=9, seconds=30), 10),  # half a minute rounds up
        (timedelta(minutes=9, seconds=29, milliseconds=999), 9),
        (timedelta(minutes=4, seconds=1), 4),
        (timedelta(seconds=90), 2),
        (timedelta(seconds=89), 1),
        (timedelta(seconds=29), 1),  # never "0 minutes"
        (timedelta(seconds=1), 1),
    ],
)
def test_the_message_states_the_minutes_left_rounded_to_the_nearest(left, shown):
    assert timestamps.minutes_left(NOW + left, NOW) == shown


CURRENT = templates.current_version("signup")


@pytest.mark.parametrize("locale", templates.locales(CURRENT))
def test_every_sms_language_has_a_whatsapp_and_a_voice_text_without_a_link(locale):
    template = templates.load(CURRENT, locale)
    assert template.sms and template.whatsapp and template.voice
    settings = MessageConfig(link_base="https://app.example.org/verify", code_digits=8)
    intent, whatsapp = render("whatsapp", CURRENT, locale, settings=settings)
    _, voice = render("voice", CURRENT, locale, settings=settings)
    key = KEYRING.get("test-k1")
    # each channel its own code, derived from the one nonce under its channel's label
    assert whatsapp.secret == key.code("whatsapp", intent.verification_id, intent.token_nonce, 8)
    assert voice.secret == key.code("voice", intent.verification_id, intent.token_nonce, 8)
    assert len({whatsapp.secret, voice.secret, key.sms_code(intent.verification_id, intent.token_nonce, 8)}) == 3
    assert whatsapp.secret in whatsapp.text
    for text in (whatsapp.text, voice.speech):
        assert "://" not in text and "app.example.org" not in text and "www." not in text


@pytest.mark.parametrize("locale", templates.locales(CURRENT))
def test_the_call_reads_the_code_digit_by_digit_twice_in_its_language(locale):
    import xml.etree.ElementTree as ET

    intent, voice = render("voice", CURRENT, locale, settings=MessageConfig(product_name="Northwind Traders"))
    digits = ", ".join(voice.secret)
    assert voice.speech.count(digits) == 2 and voice.secret not in voice.speech  # never as one number
    assert not set(voice.speech) & set("#@/<>{}[]|\\_*~^`$"), voice.speech  # words a speech engine reads
    root = ET.fromstring(voice.twiml().encode())
    say = root.find("Say")
    assert root.tag == "Response" and say is not None and say.text == voice.speech
    assert say.get("language") == {"en": "en-US", "ja": "ja-JP"}[locale] and len(voice.twiml()) < 4000


def test_a_template_version_without_the_channels_text_is_a_render_error():
    with pytest.raises(RenderError) as caught:
        render("voice", "signup/v1", "en")
    assert caught.value.error_class == "template" and "voice" in caught.value.detail


def test_the_twiml_stays_well_formed_whatever_the_product_name():
    import xml.etree.ElementTree as ET

    _, voice = render("voice", CURRENT, "en", settings=MessageConfig(product_name='Tom & "Jerry\'s" <Co>'))
    say = ET.fromstring(voice.twiml().encode()).find("Say")
    assert say is not None and say.text == voice.speech and 'Tom & "Jerry\'s" <Co>' in say.text
