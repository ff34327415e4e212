"""Which return URLs may be stored (api/return_url.py), without a database."""

from __future__ import annotations

import re

import pytest

from signup_verification.api.config import ReturnUrlConfig
from signup_verification.api.return_url import InvalidReturnUrl, check, parse_allowed_origins
from signup_verification.config import load
from signup_verification.platform.errors import ConfigError

SITE = ReturnUrlConfig(
    production=True, allowed_origins=frozenset({"https://app.example.com", "https://shop.example.com:8443"})
)
LOCAL = ReturnUrlConfig(production=False, allowed_origins=frozenset({"http://localhost:8086"}))


@pytest.mark.parametrize(
    ("url", "config"),
    [
        ("https://app.example.com/welcome?from=verify", SITE),
        ("https://APP.example.com:443/", SITE),  # the origin compares normalised: scheme and host case, default port
        ("https://shop.example.com:8443/done", SITE),
        ("http://localhost:8086/accounts/7", LOCAL),
    ],
)
def test_urls_of_an_allowed_origin_are_kept_as_sent(url, config):
    assert check(url, config) == url


@pytest.mark.parametrize(
    ("url", "config", "why"),
    [
        ("https://evil.example/", SITE, "not in RETURN_URL_ALLOWED_ORIGINS"),
        ("https://app.example.com.evil.example/", SITE, "not in RETURN_URL_ALLOWED_ORIGINS"),
        ("https://shop.example.com/done", SITE, "not in RETURN_URL_ALLOWED_ORIGINS"),  # another port, another origin
        ("http://app.example.com/", SITE, "https"),
        ("http://localhost:8086/", ReturnUrlConfig(True, frozenset({"http://localhost:8086"})), "https"),
        ("http://127.0.0.2:8086/", LOCAL, "https"),  # http only to localhost itself
        ("https://app.example.com@evil.example/", SITE, "user information"),
        ("https://user:pw@app.example.com/", SITE, "user information"),
        ("https://app.example.com\\@evil.example/", SITE, "printable ASCII"),
        ("javascript:alert(1)//app.example.com", SITE, "absolute https URL"),
        ("//app.example.com/x", SITE, "absolute https URL"),
        ("/welcome", SITE, "absolute https URL"),
        ("https://app.example.com/a b", SITE, "printable ASCII"),
        ("https://app.example.com/\nx", SITE, "printable ASCII"),
        ("https://app.example.com:99999/", SITE, "not a valid URL"),
        ("https://app.example.com/" + "a" * 1100, SITE, "at most 1024"),
    ],
)
def test_everything_else_is_refused_without_repeating_the_url(url, config, why):
    with pytest.raises(InvalidReturnUrl, match=why) as refused:
        check(url, config)
    assert "evil" not in str(refused.value)


def test_no_allowed_origins_means_no_return_url():
    with pytest.raises(InvalidReturnUrl):
        check("https://app.example.com/", ReturnUrlConfig())
    assert check(None, ReturnUrlConfig()) is None


def test_the_setting_takes_exact_origins_only():
    assert parse_allowed_origins(" https://App.example.com/ , https://b.example:8443", True) == {
        "https://app.example.com",
        "https://b.example:8443",
    }
    for bad in ("https://app.example.com/path", "app.example.com", "https://a.example?x=1", "ftp://a.example"):
        with pytest.raises(ConfigError, match="RETURN_URL_ALLOWED_ORIGINS"):
            parse_allowed_origins(bad, True)
    with pytest.raises(ConfigError, match="https"):
        parse_allowed_origins("http://localhost:8086", production=True)
    assert parse_allowed_origins("http://localhost:8086", production=False) == {"http://localhost:8086"}


def test_the_loader_reads_and_reports_the_setting():
    assert load({"RETURN_URL_ALLOWED_ORIGINS": "https://app.example.com"}).return_url.allowed_origins == {
        "https://app.example.com"
    }
    with pytest.raises(ConfigError, match="RETURN_URL_ALLOWED_ORIGINS"):
        load({"RETURN_URL_ALLOWED_ORIGINS": "https://app.example.com/welcome"})


@pytest.mark.parametrize(
    ("url", "config"),
    [("https://evil.example/", SITE), ("http://app.example.com/", SITE), ("https://u@app.example.com/", SITE),
     ("/welcome", SITE), ("https://app.example.com:99999/", SITE), ("https://a.example/ x", SITE)],
)  # fmt: skip
def test_the_field_error_reads_as_a_sentence(url, config):
    """create prefixes each reason with the field's name: "return_url points at an origin not in …"."""
    from signup_verification.api import problems
    from signup_verification.api.return_url import require_allowed

    with pytest.raises(problems.Problem) as refused:
        require_allowed(url, config)
    [error] = refused.value.errors
    detail = error["detail"]
    assert re.match(r"return_url (must|is|points at) ", detail), detail  # the field, then its verb
    assert "its " not in detail and url not in detail
