"""Redaction, in one place, for the three places text leaves the code:

mask_destination   an address or number an operator may see: 'a***@example.com', '+1******0100'
redact_text        free text bound for a log (platform/logs.py's filter): destinations masked,
                   `token=` / `code=` values and link-token shapes redacted; a safety net, since
                   code never logs a token, a code or a destination
scrub              a provider's text we store (error details, provider references): URLs,
                   secret-looking values, token shapes, addresses and numbers replaced, one line,
                   bounded (providers echo the recipient, content filters quote the link)
forget_secret      a text without one known secret, nor any piece of it (the adapter knows
                   the link token or the code it just rendered)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any


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


# -- logs ------------------------------------------------------------------------------------------
_EMAIL = re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}")
_PHONE = re.compile(r"\+\d[\d \-().]{5,}\d")
# `token=...`, `"link_token": "..."`; `code=123456` (6+ digits: SMTP and Twilio error codes stay readable).
_TOKEN_PARAM = re.compile(r"(?i)\b((?:[a-z]+_)?token)(\s*[=:]\s*\"?|\"\s*:\s*\")([^\s&\"',;]+)")
_CODE_PARAM = re.compile(r"(?i)\b((?:[a-z]+_)?code)(\s*[=:]\s*\"?|\"\s*:\s*\")(\d{6,})")
# a link's token (256-bit base64url, 43 characters), alone or after its verification id (22, sql/016)
_LINK_TOKEN = re.compile(r"(?<![A-Za-z0-9_\-])(?:[A-Za-z0-9_\-]{22})?[A-Za-z0-9_\-]{43}(?![A-Za-z0-9_\-])")


def redact_text(text: str) -> str:
    """Mask what looks like a destination or a secret in free text."""
    for pattern in (_TOKEN_PARAM, _CODE_PARAM):
        text = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}[redacted]", text)
    text = _LINK_TOKEN.sub("[redacted]", text)
    text = _EMAIL.sub(lambda m: mask_email(m.group(0)), text)
    return _PHONE.sub(lambda m: mask_phone(re.sub(r"[^\d+]", "", m.group(0))), text)


def redact_value(value: Any) -> Any:
    """redact_text through a record's structured fields."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {k: redact_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v) for v in value]
    return value


def without_query(url: str | None) -> str | None:
    if not url or "?" not in url:
        return url
    return url.split("?", 1)[0] + "?[redacted]"


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
_EMAILISH = re.compile(r"[^\s<>\"'(),;:]+@[^\s<>\"'(),;:]+")
# Secrets a provider may echo (a content filter quoting the link): URLs, token=/code= style values,
# and anything token-shaped (our link tokens are 43 base64url chars, 65 with the verification id
# before them). forget_secret removes the rendered secret itself, and any fragment of it.
_URLISH = re.compile(r"(?i)\b(?:https?|ftp)://\S+|\bwww\.\S+")
_SECRET_PARAM = re.compile(r"(?i)\b(token|code|otp|sig|signature|key)=[^\s&\"'<>;]+")
_TOKENISH = re.compile(r"[A-Za-z0-9_-]{32,}")
_PHONEISH = re.compile(r"\+?\d(?:[\s().-]?\d){6,}")  # 7+ digits: a number, not '550 5.1.1'


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
    text = _EMAILISH.sub("[address]", text)
    if numbers:
        text = _PHONEISH.sub("[number]", text)
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
