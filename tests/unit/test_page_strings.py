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


def _render_all(locale: str) -> dict[str, str]:
    soon = datetime.now(UTC) + timedelta(minutes=5)
    out = {}
    for result, rendering in RENDERINGS.items():
        outcome = Outcome(result, expires_at=soon, destination_hint="a***@example.com")
        out[rendering.page] = pages.outcome_page(rendering.page, rendering.status, outcome, "t" * 43, "Shop", locale)[0]
    out["unavailable.html"] = pages.render("unavailable.html", 503, locale=locale, token="", method="post")[0]
    return out


@pytest.mark.parametrize("locale", sorted(STRINGS))
def test_every_page_renders_in_the_locale_with_its_lang(locale):
    for page, html in _render_all(locale).items():
        assert f'<html lang="{locale}">' in html, page
        text = re.sub(r"<style>.*?</style>|<[^>]+>", " ", html, flags=re.S)
        if locale == "ja":
            assert re.search(r"[\u3040-\u30ff]", text), page  # kana: the words are Japanese
        assert "{" not in text and "}" not in text, page  # every placeholder filled


def test_the_pages_name_no_dead_end_without_a_next_step():
    html = _render_all("en")
    for page in ("expired.html", "invalid.html", "locked.html"):
        assert "send the confirmation email again" in html[page], page
        assert "go back" not in html[page].lower(), page


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
