"""Redaction, in one place, for the three places text leaves the code:

mask_destination   an address or number an operator may see: 'a***@example.com', '+1******0100'
redact_text        free text bound for a log (platform/logs.py's filter): destinations masked,
                   `token=` / `code=` values and link-token shapes redacted; a safety net, since
                   code never logs a token, a code or a destination
redact_url         a request URL or referer as logged: its path as redact_text leaves it (decoded
                   first: `%40` is an `@`), its query never
scrub              a provider's text we store (error details, provider references): URLs,
                   secret-looking values, token shapes, addresses and numbers replaced, one line,
                   bounded (providers echo the recipient, content filters quote the link)
forget_secret      a text without one known secret, nor any piece of it (the adapter knows
                   the link token or the code it just rendered)

What an address or a number looks like is said once (EMAIL, NUMBER, is_number) and used by both
redact_text and scrub: internationalised addresses (any script, IDN domains in Unicode or `xn--`
form, apostrophes), numbers in E.164 and in national formats (`(415) 555-0123`, `07700 900123`,
`06 12 34 56 78`, `090-1234-5678`). In logs a digit run must look like a number, not a date, a
time, an IPv4 address or a short count; a provider's text about an SMS loses any run of 7 digits.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit


def mask_email(address: str) -> str:
    local, sep, domain = address.rpartition("@")
    if not sep:
        return "***"
    return f"{local[:1]}***@{domain}"


def mask_phone(number: str) -> str:
    digits = number.lstrip("+")
    if len(digits) < 6:
        return "+***"
    # Country code prefix (first digit) and last four stay: '+1******4567'.
    return f"+{digits[:1]}{'*' * (len(digits) - 5)}{digits[-4:]}"


def mask_destination(channel: str, destination: str | None) -> str:
    if destination is None:
        return "[redacted]"
    return mask_email(destination) if channel == "email" else mask_phone(destination)


# -- what a destination looks like in text -----------------------------------------------------------
# An address: a local part of anything that does not end an address in text (so any script, `+tags`,
# apostrophes: o'brien@), `@` (or `%40`, percent-encoded), then a domain whose labels are anything but
# a delimiter (so Unicode, combining marks included) and whose last label is `xn--…` or starts with a
# letter. The local part starts a run (the lookbehind): a long run without an `@` is scanned once.
_NOT_LOCAL = r"\s@<>()\[\]\\,;:\"/?&="  # '/?&=': rare in an address, what a URL or a key=value is made of
_NOT_LABEL = _NOT_LOCAL + r"'#%.\u3002\uff0e\uff61"  # and the dots IDNA maps to '.'
_DOT = r"[.\u3002\uff0e\uff61]"
EMAIL = re.compile(
    rf"(?<![^{_NOT_LOCAL}])[^{_NOT_LOCAL}]+(?:@|%40)"
    rf"(?P<domain>[^{_NOT_LABEL}]+(?:{_DOT}[^{_NOT_LABEL}]+)*{_DOT}(?:xn--[A-Za-z0-9-]+|[^\W\d_][^{_NOT_LABEL}\d]*))"
)
# Any `local@domain`, with or without a top-level domain: what a provider's text about a message
# may hold (`<ada@localhost>` in an SMTP reply).
ADDRESS = re.compile(rf"(?<![^{_NOT_LOCAL}])[^{_NOT_LOCAL}]+@[^{_NOT_LABEL}]+(?:{_DOT}[^{_NOT_LABEL}]+)*")
# A number: `+` (or `%2B`) and digits, or digits alone (a `00` prefix is digits like the rest), in
# groups joined by at most two of space, no-break space, `.`, `-`, `/`, `(`, `)`; not inside a
# longer token. is_number decides.
NUMBER = re.compile(
    r"(?:(?<![\w+])(?:\+|%2[Bb])|(?<![\w+.\-/]))"
    r"\(?\d(?:[ \u00a0.\-/()]{0,2}\d)+\)?(?![\w]|[.\-/]\d)"
)
# a date (ISO, or day.month.year), maybe with the hour that follows it before a ':'
_DATE = re.compile(r"(?:(?:19|20)\d\d[-./]\d\d?[-./]\d\d?|\d\d?[-./]\d\d?[-./](?:19|20)?\d\d)(?:[ T]\d\d?)?")
_IPV4 = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")
_BASIC_DATE = re.compile(r"(?:19|20)\d\d(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])")


def is_number(candidate: str, strict: bool = True) -> bool:
    """Whether a NUMBER match is a phone number: 7 to 15 digits. With `+` (E.164) always; otherwise,
    `strict` (logs), not a date, an IPv4 address, nor a run of fewer than 8 bare digits or a
    YYYYMMDD date (with separators 7 digits do: `555-0123`)."""
    digits = re.sub(r"\D", "", candidate.replace("%2B", "+").replace("%2b", "+"))
    if not 7 <= len(digits) <= 15:
        return False
    if candidate.startswith(("+", "%2")) or not strict:
        return True
    if _DATE.fullmatch(candidate) or _IPV4.fullmatch(candidate):
        return False
    if candidate.isdigit():  # no separator: a count, an id or a timestamp as often as a number
        return len(digits) >= 8 and not _BASIC_DATE.fullmatch(digits)
    return True


def replace_numbers(text: str, render: Callable[[str], str], strict: bool = True) -> str:
    """Each number in `text` (is_number) replaced by render(number). A run of groups too long to be
    one number (`+14155550123/07700 900123`) is cut where the next group would pass 15 digits."""

    def one(match: re.Match[str]) -> str:
        found = match.group(0).replace("%2B", "+").replace("%2b", "+")
        pieces = [found] if is_number(found, strict) else _pieces(found)
        return "".join(render(piece) if is_number(piece, strict) else piece for piece in pieces)

    return NUMBER.sub(one, text)


def _pieces(found: str) -> list[str]:
    pieces, current, count = [], "", 0
    for part in re.findall(r"\D*\d+|\D+$", found):  # each group of digits with what comes before it
        digits = sum(c.isdigit() for c in part)
        if current and count + digits > 15:
            gap = part[: len(part) - len(part.lstrip(" \u00a0.-/()"))]
            pieces += [current, gap]
            current, count = part[len(gap) :], digits
        else:
            current, count = current + part, count + digits
    return [*pieces, current]


def _masked_number(found: str) -> str:
    """E.164 as mask_phone shows it; a national number keeps its shape and its last four digits."""
    if found.startswith(("+", "%2")):
        return mask_phone(re.sub(r"\D", "", found.replace("%2B", "+").replace("%2b", "+")))
    seen, kept = 0, []
    total = sum(c.isdigit() for c in found)
    for c in found:
        if c.isdigit():
            seen += 1
            kept.append(c if seen > total - 4 else "*")
        else:
            kept.append(c)
    return "".join(kept)


# -- logs ------------------------------------------------------------------------------------------
# `token=...`, `"link_token": "..."`, `'token': '...'`; `code=123456` (6+ digits: SMTP and Twilio
# error codes stay readable). Either quote: a Python repr and a User-Agent use single ones.
_TOKEN_PARAM = re.compile(r"(?i)\b((?:[a-z]+_)?token)(\s*[=:]\s*[\"']?|[\"']\s*[=:]\s*[\"']?)([^\s&\"',;]+)")
_CODE_PARAM = re.compile(r"(?i)\b((?:[a-z]+_)?code)(\s*[=:]\s*[\"']?|[\"']\s*[=:]\s*[\"']?)(\d{6,})")
# a link's token (256-bit base64url, 43 characters), alone or after its verification id (22)
_LINK_TOKEN = re.compile(r"(?<![A-Za-z0-9_\-])(?:[A-Za-z0-9_\-]{22})?[A-Za-z0-9_\-]{43}(?![A-Za-z0-9_\-])")


def redact_text(text: str) -> str:
    """Mask what looks like a destination or a secret in free text."""
    for pattern in (_TOKEN_PARAM, _CODE_PARAM):
        text = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}[redacted]", text)
    text = _LINK_TOKEN.sub("[redacted]", text)
    if "@" in text or "%40" in text:
        text = EMAIL.sub(lambda m: mask_email(m.group(0).replace("%40", "@")), text)
    return replace_numbers(text, _masked_number)


def redact_value(value: Any) -> Any:
    """redact_text through a record's structured fields."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {k: redact_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v) for v in value]
    return value


_URL_PATH_MAX = 200


def redact_url(url: str | None) -> str | None:
    """A URL as logged: the path as sent (so percent-decoded first) through redact_text, cut at 200
    characters, re-encoded; the query and fragment never (`?[redacted]`)."""
    if not url:
        return url
    parts = urlsplit(url)
    path = redact_text(unquote(parts.path, errors="replace"))
    cut = "…" if len(path) > _URL_PATH_MAX else ""
    path = quote(path[:_URL_PATH_MAX], safe="/*[]@+:;,=~!$&'()-._") + cut
    return urlunsplit((parts.scheme, parts.netloc, path, "", "")) + ("?[redacted]" if parts.query else "")


_UA_COMMENT = re.compile(r"\([^()]*\)")
_UA_MAX = 200


def user_agent(value: str | None) -> str | None:
    """A User-Agent as logged: its product tokens (`name/version`) redacted like free text, its
    comments (the parenthesised free-form parts) dropped, at most 200 characters. The header is
    whatever the caller wrote, so it is treated like the query string: never logged as sent."""
    if not value:
        return value
    text, previous = value, None
    while text != previous:  # nested comments from the inside out
        previous, text = text, _UA_COMMENT.sub(" ", text)
    return redact_text(" ".join(text.replace("(", " ").replace(")", " ").split()))[:_UA_MAX]


# -- provider texts we store ---------------------------------------------------------------------
# Secrets a provider may echo (a content filter quoting the link): URLs, token=/code= style values,
# and anything token-shaped (our link tokens are 43 base64url chars, 65 with the verification id
# before them). forget_secret removes the rendered secret itself, and any fragment of it.
_URLISH = re.compile(r"(?i)\b(?:https?|ftp)://\S+|\bwww\.\S+")
_SECRET_PARAM = re.compile(r"(?i)\b(token|code|otp|sig|signature|key)=[^\s&\"'<>;]+")
_TOKENISH = re.compile(r"[A-Za-z0-9_-]{32,}")


def scrub(text: str | bytes | None, limit: int = 200, *, numbers: bool = True) -> str:
    """A provider's text made safe to store: no URL, token or token=/code= value (a live link must
    never reach the database or a log), no addresses or numbers that could be a destination,
    one line, bounded. (Providers echo the recipient in rejections.) `numbers=False` for texts
    about an email, where a digit run is a queue id, never a phone number."""
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = _URLISH.sub("[url]", text)
    text = _SECRET_PARAM.sub(lambda m: m.group(1) + "=[redacted]", text)
    text = _TOKENISH.sub("[token]", text)
    text = ADDRESS.sub("[address]", text)
    if numbers:  # any run of 7 digits or more: a number, not '550 5.1.1'
        text = replace_numbers(text, lambda _: "[number]", strict=False)
    return " ".join(text.split())[:limit]


_FRAGMENT = 8  # a run this long that occurs in the secret is a piece of it (8 base64url chars: 48 bits)


def forget_secret(text: str | None, secret: str) -> str | None:
    """`text` with the secret and every run of >= 8 of its characters (the whole secret when shorter)
    replaced by [secret]."""
    if not text or not secret:
        return text
    shortest = min(_FRAGMENT, len(secret))
    out, i = [], 0
    while i < len(text):
        length = 0
        while i + length < len(text) and text[i : i + length + 1] in secret:
            length += 1
        if length >= shortest:
            out.append("[secret]")
            i += length
        else:
            out.append(text[i])
            i += 1
    return "".join(out)
