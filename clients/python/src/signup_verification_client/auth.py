"""The two caller identities the service accepts (its docs/security.md).

* `GoogleIdToken`: on Google Cloud, a Google-signed ID token whose audience is the function's URL,
  fetched through google-auth (the `google` extra) from the metadata server or the service account
  in GOOGLE_APPLICATION_CREDENTIALS, cached until shortly before it expires.
* `SignedRequests`: outside Google Cloud, `Verify-Signature: t=<unix seconds>,v2=<hex HMAC-SHA256>`
  over eight lines (v2, method, target, the URL's path, its raw query, Idempotency-Key, t, the
  body's SHA-256) under a shared key of `REQUEST_SIGNING_KEYS`. Each request is accepted once, so
  every attempt signs again.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit


class CallerAuth(Protocol):
    def headers(
        self, method: str, target: str, idempotency_key: str | None, body: bytes, url: str = "/"
    ) -> dict[str, str]: ...


def canonical(
    method: str, target: str, path: str, query: str, idempotency_key: str | None, timestamp: int, body: bytes
) -> bytes:
    """What the MAC covers: eight lines joined by "\\n", no trailing newline (the service's
    docs/security.md gives a worked example)."""
    digest = hashlib.sha256(body).hexdigest()
    lines = ("v2", method.upper(), target, path, query, idempotency_key or "", str(timestamp), digest)
    return "\n".join(lines).encode()


@dataclass(frozen=True)
class SignedRequests:
    """`secret`: the key's bytes, or the `key_id:base64url-secret` text `verifyctl new-key` printed."""

    secret: bytes = field(repr=False)
    clock: Callable[[], float] = time.time

    @classmethod
    def from_key(cls, key: str) -> SignedRequests:
        encoded = key.rpartition(":")[2].strip()
        secret = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        if len(secret) < 32:
            raise ValueError("a request signing key is at least 32 bytes (key_id:base64url-secret)")
        return cls(secret)

    def headers(
        self, method: str, target: str, idempotency_key: str | None, body: bytes, url: str = "/"
    ) -> dict[str, str]:
        """`url`: the request's URL (or its path and query): its path and raw query as sent are signed."""
        parts = urlsplit(url)
        t = int(self.clock())
        signed = canonical(method, target, parts.path or "/", parts.query, idempotency_key, t, body)
        return {"Verify-Signature": f"t={t},v2={hmac.new(self.secret, signed, hashlib.sha256).hexdigest()}"}


class GoogleIdToken:
    """An ID token for `audience` (the function's URL), from google-auth; refreshed 5 minutes early.
    `fetch(audience) -> token` replaces google-auth's fetcher (tests, custom credentials)."""

    REFRESH_EARLY = 300

    def __init__(self, audience: str, fetch: Callable[[str], str] | None = None):
        self.audience = audience
        self._fetch = fetch or _google_fetch
        self._lock = threading.Lock()
        self._token: str | None = None
        self._expires = 0.0

    def headers(
        self, method: str, target: str, idempotency_key: str | None, body: bytes, url: str = "/"
    ) -> dict[str, str]:
        with self._lock:
            if self._token is None or time.time() > self._expires - self.REFRESH_EARLY:
                self._token = self._fetch(self.audience)
                self._expires = _expiry(self._token)
            return {"Authorization": f"Bearer {self._token}"}


def _google_fetch(audience: str) -> str:
    try:
        import google.auth.transport.requests
        import google.oauth2.id_token
    except ImportError:  # the extra is optional: say which one to install
        raise RuntimeError(
            "GoogleIdToken needs google-auth: pip install 'signup-verification-client[google]'"
        ) from None
    token = google.oauth2.id_token.fetch_id_token(google.auth.transport.requests.Request(), audience)
    return str(token)


def _expiry(token: str) -> float:
    """The token's `exp` claim (read, not verified: the service's platform verifies it); 0 if unreadable."""
    try:
        payload = token.split(".")[1]
        exp = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))).get("exp")
        return float(exp)
    except (IndexError, ValueError, TypeError, AttributeError):
        return 0.0
