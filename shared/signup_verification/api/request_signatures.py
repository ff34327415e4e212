"""Signed requests (docs/security.md "Signed requests"): what a caller's HMAC covers, how the
signatures of one request are checked, and what is remembered so that the request is used once.

`Verify-Signature: t=<unix seconds>,v2=<hex HMAC-SHA256>[,v2=<hex>...]` (one `v2=` per key while
rotating). The MAC covers eight lines joined by "\\n" (`canonical_v2`): `v2`, the method, the
target, the path as sent, the raw query, the Idempotency-Key, `t`, and the body's SHA-256, so a
signature is good for one method, target, path, query, key and body only.

The older `v1=` entries (six lines: no path, no query) are accepted only on a request to `/`
without a query, where the path and query they do not cover are fixed; anywhere else (the read
API's `/<verification id>`, any query) they are ignored, so a `v1=` made for one path never opens
another. Each use is logged (`deprecated_signature`, scheme `v1`).

A request is used once, whichever of its signatures matched: `replay_digest` names the request
(method, target, path, query, key, t, body digest), not a MAC, so presenting it again with any
subset of its `v1=`/`v2=` entries is a replay (platform/queries/signatures.sql:remember_signature).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import dataclass

SCHEMES = ("v2", "v1")


@dataclass(frozen=True)
class SignedRequest:
    """The parts of a request a signature covers."""

    method: str
    target: str
    path: str  # as sent on the request line, before any '?'
    query: str  # the raw query string, '' when none
    idempotency_key: str | None
    body: bytes

    @property
    def body_digest(self) -> str:
        return hashlib.sha256(self.body).hexdigest()

    @property
    def root(self) -> bool:
        """`/` without a query: the only request a `v1=` entry can bind."""
        return self.path == "/" and not self.query


@dataclass(frozen=True)
class Verified:
    scheme: str  # 'v2' or 'v1'
    timestamp: int
    digest: bytes  # replay_digest: what signature_replay remembers


def canonical_v2(request: SignedRequest, timestamp: int) -> bytes:
    lines = (
        "v2",
        request.method.upper(),
        request.target,
        request.path,
        request.query,
        request.idempotency_key or "",
        str(timestamp),
        request.body_digest,
    )
    return "\n".join(lines).encode()


def canonical_v1(method: str, target: str, idempotency_key: str | None, timestamp: int, body: bytes) -> bytes:
    """The six-line form without path or query (accepted on `/` without a query only)."""
    digest = hashlib.sha256(body).hexdigest()
    return f"v1\n{method.upper()}\n{target}\n{idempotency_key or ''}\n{timestamp}\n{digest}".encode()


def replay_digest(request: SignedRequest, timestamp: int) -> bytes:
    """The request's name in signature_replay: the same for every signature it carries."""
    return hashlib.sha256(b"request\n" + canonical_v2(request, timestamp)).digest()


def _mac(secret: bytes, signed: bytes) -> str:
    return hmac.new(secret, signed, hashlib.sha256).hexdigest()


def sign_v2(secrets: list[bytes], request: SignedRequest, timestamp: int | None = None) -> str:
    """The Verify-Signature value for `request`: one `v2=` per secret (a caller rotating keys)."""
    t = int(time.time()) if timestamp is None else timestamp
    return ",".join([f"t={t}", *(f"v2={_mac(secret, canonical_v2(request, t))}" for secret in secrets)])


def parse(header: str | None) -> tuple[int | None, dict[str, list[bytes]]]:
    """`t` and the candidate MACs per scheme; malformed parts are ignored (and so never match)."""
    timestamp: int | None = None
    candidates: dict[str, list[bytes]] = {scheme: [] for scheme in SCHEMES}
    for part in (header or "").split(","):
        name, _, value = part.strip().partition("=")
        if name == "t" and value.isascii() and value.isdigit() and len(value) <= 12:  # '²'.isdigit() is True
            timestamp = int(value)
        elif name in candidates and len(value) == 64:
            candidates[name].append(value.lower().encode())
    return timestamp, candidates


def _matches(secrets: list[bytes], signed: bytes, candidates: list[bytes]) -> bool:
    matched = False
    for secret in secrets:  # every key, every candidate: no early exit on a match
        expected = _mac(secret, signed).encode()
        for candidate in candidates:
            matched |= hmac.compare_digest(expected, candidate)
    return matched


def _fresh(timestamp: int | None, tolerance: int, now: float | None) -> bool:
    now = time.time() if now is None else now
    return timestamp is not None and abs(now - timestamp) <= tolerance


def verify(
    secrets: list[bytes], tolerance: int, header: str | None, request: SignedRequest, now: float | None = None
) -> Verified | None:
    """The request's Verify-Signature checked: a `v2=` for this exact request, or a `v1=` where it
    binds as much (`/` without a query); None when neither matches, or `t` is out of the window."""
    timestamp, candidates = parse(header)
    if timestamp is None or not _fresh(timestamp, tolerance, now):
        return None
    v2 = bool(candidates["v2"]) and _matches(secrets, canonical_v2(request, timestamp), candidates["v2"])
    v1 = False
    if request.root and candidates["v1"]:
        signed = canonical_v1(request.method, request.target, request.idempotency_key, timestamp, request.body)
        v1 = _matches(secrets, signed, candidates["v1"])
    if not (v2 or v1):
        return None
    return Verified("v2" if v2 else "v1", timestamp, replay_digest(request, timestamp))
