"""The confirmation pages speak every locale the messages do, with every string in each."""

from __future__ import annotations

import re
import string
from datetime import UTC, datetime, timedelta

import pytest

from signup_verification.api import pages
from signup_verification.api.confirm import RENDERINGS
from signup_verification.api.pages.strings import DEFAULT, STRINGS
from signup_verification.delivery import templates
from signup_verification.verifications.confirm import Outcome, Result

MESSAGE_LOCALES = sorted(
    {locale for purpose in templates.purposes() for locale in templates.locales(templates.current_version(purpose))}
)


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def test_every_message_locale_has_page_strings():
    assert set(MESSAGE_LOCALES) <= set(STRINGS) and {"en", "ja"} <= set(MESSAGE_LOCALES)


@pytest.mark.parametrize("locale", sorted(STRINGS))
def test_every_page_string_exists_in_every_locale_with_the_same_placeholders(locale):
    assert set(STRINGS[locale]) == set(STRINGS[DEFAULT])
    for key, text in STRINGS[DEFAULT].items():
        assert _fields(STRINGS[locale][key]) == _fields(text), key
        assert STRINGS[locale][key].strip(), key


def _render_all(locale: str, kind: str = "link") -> dict[str, str]:
    """Every page, about a link or (`code`) about an SMS code, the code-entry form with both errors."""
    soon = datetime.now(UTC) + timedelta(minutes=5)
    hint = "a***@example.com" if kind == "link" else "+1******0100"
    out = {}
    for result, rendering in RENDERINGS.items():
        outcome = Outcome(result, expires_at=soon, destination_hint=hint, remaining_attempts=3)
        html = pages.outcome_page(rendering.page, rendering.status, outcome, "t" * 43, "Shop", locale, kind=kind)
        out[rendering.page] = html[0]
    if kind == "code":
        pending = Outcome(Result.PENDING, expires_at=soon, destination_hint=hint, remaining_attempts=3)
        for error in (None, "wrong", "malformed"):
            html = pages.outcome_page(
                "code.html", 200, pending, "e" * 44, "Shop", locale, kind=kind, error=error, digits=6
            )
            out[f"code.html {error}"] = html[0]
    unavailable = pages.render(
        "unavailable.html", 503, locale=locale, kind=kind, field="token", value="", method="post"
    )
    out["unavailable.html"] = unavailable[0]
    return out


@pytest.mark.parametrize("kind", ["link", "code"])
@pytest.mark.parametrize("locale", sorted(STRINGS))
def test_every_page_renders_in_the_locale_with_its_lang(locale, kind):
    for page, html in _render_all(locale, kind).items():
        assert f'<html lang="{locale}">' in html, page
        text = re.sub(r"<style>.*?</style>|<[^>]+>", " ", html, flags=re.S)
        if locale == "ja":
            assert re.search(r"[\u3040-\u30ff]", text), page  # kana: the words are Japanese
        assert "{" not in text and "}" not in text, page  # every placeholder filled


def test_the_pages_name_no_dead_end_without_a_next_step():
    html, about_code = _render_all("en"), _render_all("en", "code")
    for page in ("expired.html", "invalid.html", "locked.html"):
        assert "send the confirmation email again" in html[page], page
        assert "go back" not in html[page].lower(), page
    for page in ("expired.html", "locked.html"):
        assert "send the code again" in about_code[page] and "email" not in about_code[page], page


def test_pages_about_a_code_speak_of_the_code_and_the_phone():
    html = _render_all("en", "code")
    assert "Phone number confirmed" in html["verified.html"] and "Email" not in html["verified.html"]
    assert "already confirmed with this code" in html["already.html"]
    assert "This code has expired" in html["expired.html"] and "A newer code was sent" in html["superseded.html"]
    assert "You can try 3 more times" in html["code.html wrong"] and 'aria-invalid="true"' in html["code.html wrong"]
    assert "Enter the 6-digit code" in html["code.html malformed"]
    assert 'role="alert"' not in html["code.html None"]


def test_the_code_entry_form_is_one_field_the_phone_fills_in():
    form = _render_all("en", "code")["code.html None"]
    [field] = re.findall(r"<input id=\"code\"[^>]*>", form)
    assert 'autocomplete="one-time-code"' in field and 'inputmode="numeric"' in field and "required" in field
    assert '<label for="code">' in form and 'name="entry" value="' + "e" * 44 + '"' in form
    assert len(re.findall(r"<input ", form)) == 2  # the code, and the page's handle (hidden)


@pytest.mark.parametrize(
    ("verification", "header", "expected"),
    [
        ("ja", "en-US,en;q=0.9", "ja"),  # the verification's locale wins: its email was in Japanese
        ("ja-JP", None, "ja"),
        (None, "ja,en;q=0.5", "ja"),  # no verification (invalid link): the browser's preference
        (None, "fr-CA,fr;q=0.9", "en"),
        (None, None, "en"),
        ("de", "ja", "ja"),
    ],
)
def test_choose_locale(verification, header, expected):
    assert pages.choose_locale(verification, header) == expected


@pytest.mark.parametrize(
    ("left", "said"),
    [
        (timedelta(minutes=9, seconds=59), "expires in about 10 minutes"),  # a fresh 10-minute link, opened at once
        (timedelta(minutes=9, seconds=29), "expires in about 9 minutes"),
        (timedelta(seconds=89), "expires in about 1 minute."),
        (timedelta(seconds=10), "expires in about 1 minute."),
    ],
)
def test_the_confirm_page_states_the_minutes_left_as_the_message_does(left, said):
    outcome = Outcome(Result.PENDING, expires_at=datetime.now(UTC) + left, destination_hint="a***@example.com")
    assert said in pages.outcome_page("confirm.html", 200, outcome, "t" * 43, "Shop", "en")[0]


def test_a_hint_is_escaped():
    outcome = Outcome(Result.VERIFIED, destination_hint="<script>x</script>")
    html = pages.outcome_page("verified.html", 200, outcome, locale="ja")[0]
    assert "<script>x" not in html and "<strong>&lt;script&gt;x&lt;/script&gt;</strong>" in html


@pytest.mark.parametrize(
    ("channel", "medium", "others"),
    [
        ("sms", {"en": "text message", "ja": "SMS"}, ("WhatsApp", "call")),
        ("whatsapp", {"en": "WhatsApp message", "ja": "WhatsApp"}, ("text message", "SMS")),
        ("voice", {"en": "call", "ja": "電話"}, ("text message", "SMS", "WhatsApp")),
    ],
)
@pytest.mark.parametrize("locale", sorted(STRINGS))
def test_the_code_entry_page_names_the_message_or_call_that_carried_the_code(locale, channel, medium, others):
    soon = datetime.now(UTC) + timedelta(minutes=5)
    shown = {}
    for error in (None, "malformed"):
        pending = Outcome(Result.PENDING, presented=channel, expires_at=soon, destination_hint="+1******0100")
        html = pages.outcome_page("code.html", 200, pending, "e" * 44, "Shop", locale, kind="code", error=error,
                                  digits=6)[0]  # fmt: skip
        shown[error] = re.sub(r"<style>.*?</style>|<[^>]+>", " ", html, flags=re.S)
    superseded = Outcome(Result.SUPERSEDED, presented=channel, destination_hint="+1******0100")
    rendering = RENDERINGS[Result.SUPERSEDED]
    shown["superseded"] = pages.outcome_page(rendering.page, rendering.status, superseded, locale=locale, kind="code")[
        0
    ]
    for page, text in shown.items():
        assert medium[locale] in text, page
        assert not any(other in text for other in others), page
