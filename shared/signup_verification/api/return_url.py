"""The return URL: where the confirmation pages send the person back to.

Create accepts an optional `return_url`; it is kept only when its origin is one of
RETURN_URL_ALLOWED_ORIGINS (exact origins, comma-separated) and it is `https`, or `http` to localhost
outside production. The pages link only to the stored URL, so they can never be made an open
redirect: a URL nobody allowed never gets stored, and nothing from the link's query is ever used.

URLs that parsers read differently are refused outright rather than normalised: user info
(`https://site.example@evil.example/`), backslashes (browsers read `\\` as `/`), whitespace and control
characters, a fragment-only trick or an unparseable port.
"""

from __future__ import annotations

import re
from typing import Protocol
from urllib.parse import urlsplit

from ..platform.errors import ConfigError
from . import problems

MAX_LENGTH = 1024  # the model's limit; verifications.return_url's CHECK allows 2048
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
_DEFAULT_PORTS = {"https": 443, "http": 80}
_SAFE = re.compile(r"[!-~]+")  # printable ASCII, no space: an IRI must arrive percent-encoded


class InvalidReturnUrl(ValueError):
    """Why the URL is refused, in words that never repeat the URL."""


class AllowedOrigins(Protocol):
    """Where a return URL may point (config.py's ReturnUrlConfig, whose origins parse_allowed_origins reads)."""

    @property
    def production(self) -> bool: ...
    @property
    def allowed_origins(self) -> frozenset[str]: ...


def origin_of(url: str, production: bool) -> str:
    """'https://Site.example:443/x' -> 'https://site.example'; raises InvalidReturnUrl."""
    if len(url) > MAX_LENGTH or not _SAFE.fullmatch(url) or "\\" in url:
        raise InvalidReturnUrl(f"must be an absolute http(s) URL of printable ASCII, at most {MAX_LENGTH} characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise InvalidReturnUrl("is not a valid URL") from None
    scheme, host = parts.scheme.lower(), (parts.hostname or "")
    if scheme not in _DEFAULT_PORTS or not host or not parts.netloc:
        raise InvalidReturnUrl("must be an absolute https URL")
    if "@" in parts.netloc:
        raise InvalidReturnUrl("must not contain user information")
    if scheme == "http" and (production or host not in LOCAL_HOSTS):
        raise InvalidReturnUrl("must use https (http only to localhost, and not in production)")
    shown_host = f"[{host}]" if ":" in host else host
    shown_port = "" if port in (None, _DEFAULT_PORTS[scheme]) else f":{port}"
    return f"{scheme}://{shown_host}{shown_port}"


def check(url: str | None, config: AllowedOrigins) -> str | None:
    """The URL to store (as sent), or None; raises InvalidReturnUrl when it may not be stored."""
    if url is None:
        return None
    if origin_of(url, config.production) not in config.allowed_origins:
        raise InvalidReturnUrl("points at an origin not in RETURN_URL_ALLOWED_ORIGINS")
    return url


def require_allowed(url: str | None, config: AllowedOrigins) -> None:
    """The create edge's check: a 400 field error (never echoing the URL) unless it may be stored."""
    try:
        check(url, config)
    except InvalidReturnUrl as exc:
        raise problems.bad_request(
            "The body failed validation.", [{"pointer": "#/return_url", "detail": f"return_url {exc}"}]
        ) from None


def parse_allowed_origins(raw: str | None, production: bool) -> frozenset[str]:
    """RETURN_URL_ALLOWED_ORIGINS: 'https://app.example.com,https://www.example.com' (origins only)."""
    origins = set()
    for entry in (part.strip() for part in (raw or "").split(",")):
        if not entry:
            continue
        try:
            origin = origin_of(entry, production)
        except InvalidReturnUrl as exc:
            raise ConfigError(f"RETURN_URL_ALLOWED_ORIGINS entry {entry[:80]!r} {exc}") from None
        parts = urlsplit(entry)
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise ConfigError(f"RETURN_URL_ALLOWED_ORIGINS entry {entry[:80]!r} must be an origin (no path)")
        origins.add(origin)
    return frozenset(origins)
