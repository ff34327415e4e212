"""One pattern set for what an address and a number look like (platform/redaction.py), checked on a
corpus of real-world shapes: every address and every number below loses all but what a mask keeps
(an address's first character and its domain; a number's last four digits) in a log line
(redact_text) and all of it in a stored provider text (scrub); what operators need to read (dates,
times, addresses of servers, versions, SMTP and Twilio codes, ids) stays as it was."""

from __future__ import annotations

import re

import pytest

from signup_verification.platform.redaction import redact_text, redact_url, scrub

ADDRESSES = [
    "ada.lovelace@example.com",
    "Ada.Lovelace+signup@Example.COM",
    "o'brien@example.ie",  # an apostrophe in the local part
    "d'artagnan.jean-luc@mail.example.fr",
    "user_name-1@sub.domain.example.co.uk",
    "josé.garcía@bücher.de",  # a Unicode local part, an IDN domain
    "ada@xn--bcher-kva.de",  # the same domain in its IDNA form
    "用户@例子.广告",  # Chinese, both parts (EAI)
    "пользователь@пример.рф",  # Cyrillic
    "χρήστης@παράδειγμα.δοκιμή",  # Greek
    "नमस्ते@भारत.भारत",  # Devanagari, combining vowel signs in every label
    "ユーザー@例え.テスト",  # Japanese
    "ada@例え。テスト",  # an ideographic full stop, as IDNA reads it
    "victim+1@contoso-corp.com",
    "first.last@example.xn--p1ai",  # an IDN top-level domain in its IDNA form
    "news@ada.fastmail.com",
    "1234567890@example.com",  # digits only: masked as an address, not left as a number
]

NUMBERS = [
    "+14155550123",  # E.164
    "+1 (415) 555-0123",
    "+44 20 7946 0018",
    "+44 (0)20 7946 0018",  # the trunk 0 in brackets
    "+33 6 12 34 56 78",
    "+49 30 1234567",
    "+81 90-1234-5678",
    "+91 98765 43210",
    "+55 11 91234-5678",
    "(415) 555-0123",  # national formats, as people write them
    "415-555-0123",
    "415.555.0123",
    "415 555 0123",
    "4155550123",
    "555-0123",  # a local US number
    "07700 900123",  # UK mobile
    "020 7946 0018",  # London
    "06 12 34 56 78",  # France
    "06.12.34.56.78",
    "0612345678",
    "030 1234567",  # Berlin
    "030/1234567",  # the German slash
    "0151 23456789",
    "090-1234-5678",  # Japan
    "03-1234-5678",
    "98765 43210",  # India
    "(11) 91234-5678",  # Brazil
    "612 34 56 78",  # Spain (no trunk prefix)
    "612345678",
    "0412 345 678",  # Australia
    "0044 20 7946 0018",  # the international prefix instead of +
    "%2B14155550123",  # percent-encoded, as a URL carries it
]

KEPT = [
    "2026-12-01 12:00:01",
    "2026-12-01T12:00:01.234Z",
    "01.12.2026",
    "12/01/2026",
    "20261201",  # a basic ISO date in an id
    "203.0.113.9",
    "[198.51.100.7]:587",
    "v3.11.4",
    "550 5.1.1",
    "421 4.7.0 try again later",
    "twilio 400 code 21211",
    "lease_version=3 intent 17",
    "claimed=25 accepted=24 elapsed_ms=1234",
    "0b7f6c1e-5d0e-4a43-9f0a-2f1a4d3c2b1a",
    "SM8c4d7beaf75ce73ce83ecaf57942bfe3",
    "1048576 bytes",
    "u***@example.com +1******4567",  # already masked
]


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


@pytest.mark.parametrize("address", ADDRESSES)
@pytest.mark.parametrize(
    "frame", ["{}", "sent to {} today", "<{}>", '"{}"', "mailto:{}", "({}).", "{},", "/u/{}/x", "?to={}&x=1"]
)
def test_every_address_shape_is_masked_in_a_log_line(address, frame):
    local, _, domain = address.rpartition("@")
    assert redact_text(frame.format(address)) == frame.format(f"{local[0]}***@{domain}")
    # quoted with apostrophes (an apostrophe may be part of a local part): the mask starts at the quote
    assert redact_text(f"'{address}'") == f"'***@{domain}'"


@pytest.mark.parametrize("number", NUMBERS)
@pytest.mark.parametrize("frame", ["{}", "sms to {} queued", "<{}>", "tel:{}", "call {}, then", "to={}&x"])
def test_every_number_shape_is_masked_in_a_log_line(number, frame):
    out = redact_text(frame.format(number))
    digits = _digits(number.replace("%2B", "+"))
    assert number not in out and digits not in _digits(out)
    assert out.count("*") >= len(digits) - 5  # all but the mask's kept digits hidden
    assert _digits(out).endswith(digits[-4:]) or digits[-4:] in out


@pytest.mark.parametrize("text", KEPT)
def test_what_operators_read_stays_readable(text):
    assert redact_text(text) == text
    assert redact_text(f"at {text}, then") == f"at {text}, then"


@pytest.mark.parametrize("destination", ADDRESSES + [n for n in NUMBERS if len(_digits(n)) >= 7])
def test_a_stored_provider_text_keeps_nothing_of_a_destination(destination):
    out = scrub(f"550 5.1.1 <{destination}>: rejected, retry 2026-12-01", limit=500)
    local = destination.rpartition("@")[0]
    assert destination not in out and (not local or local not in out)
    digits = _digits(destination.replace("%2B", "+"))
    if "@" not in destination:
        assert digits[-4:] not in _digits(out.replace("550 5.1.1", "").replace("2026-12-01", ""))
    assert out.startswith("550 5.1.1 <[")


@pytest.mark.parametrize(
    "raw, masked",
    [
        ("Bot/1.0 token='dGhpcyBpcyBzaG9ydA'", "Bot/1.0 token='[redacted]'"),  # single quotes, a short value
        ("Bot/1.0 code='123456'", "Bot/1.0 code='[redacted]'"),
        ("{'code': '123456', 'link_token': 'abc'}", "{'code': '[redacted]', 'link_token': '[redacted]'}"),
        ('{"code": "123456"}', '{"code": "[redacted]"}'),
    ],
)
def test_either_quote_around_a_secret_parameter(raw, masked):
    assert redact_text(raw) == masked


@pytest.mark.parametrize(
    "url, logged",
    [
        ("https://confirm.example/?token=abc", "https://confirm.example/?[redacted]"),
        ("https://confirm.example/ada%40example.com", "https://confirm.example/a***@example.com"),
        ("https://confirm.example/u/%2B14155550123?x=1", "https://confirm.example/u/+1******0123?[redacted]"),
        ("https://confirm.example/" + "A" * 43, "https://confirm.example/[redacted]"),
        ("https://create.example/0b7f6c1e-5d0e-4a43-9f0a-2f1a4d3c2b1a", None),  # an id stays as sent
    ],
)
def test_a_request_url_keeps_its_path_only_as_redacted(url, logged):
    assert redact_url(url) == (logged or url)


def test_a_long_path_is_cut():
    out = redact_url("https://confirm.example/" + "x/" * 5000)
    assert out is not None and len(out) < 300 and out.endswith("…")
