"""Who may call each HTTP target (docs/security.md): platform identity, or an HMAC-signed request.

On Google Cloud every target but `confirm_verification` is deployed with IAM invoker only: Cloud
Run verifies the caller's Google-signed ID token (signature, audience, expiry) and its
`roles/run.invoker` grant *before* the request reaches the function; an unauthenticated request
never runs our code. Cloud Run then passes the token on with its signature removed, so the
function cannot re-verify it. The in-app check below is defence in depth for a misconfiguration
(an `allUsers` invoker binding, a target deployed public by mistake):

* production (`ENVIRONMENT=production`): a guarded target refuses (401 problem+json) a request that
  carries neither a platform identity, i.e. an ID token Cloud Run passed on, not expired, issued by
  Google and, when `ALLOWED_INVOKERS` is set, naming one of those principals, nor a valid signature;
* `REQUEST_SIGNING_KEYS` (callers outside Google Cloud): the targets in `SIGNED_TARGETS`
  (default `create_verification`) require `Verify-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256
  of the canonical request>` (`canonical()`: method, target, Idempotency-Key, t, body SHA-256) under
  one of the target's keys, within `SIGNATURE_TOLERANCE_SECONDS` (300) of now, compared in constant
  time, in every environment, and each signature is accepted once (`signature_replay`, a table:
  the window spans instances). Such a target is typically public, so a platform identity header is
  *not* enough for it: anyone can write one, nobody verified it.
* one release of overlap: the old `Signature: t=..,v1=HMAC("<t>." + body)` is still accepted, with
  its old semantics only (no method/target/key binding, no replay refusal), and logged as legacy.

`confirm_verification` is public by design (people open links): never guarded here; its tokens,
attempt limits and rate limits are its protection. A captured signature cannot be replayed: not
with another Idempotency-Key (a new message), not against another target (a create signature
running a reconcile), not twice. A caller's retry signs again (a new `t`).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..platform.errors import ConfigError
from . import problems
from .http import Incoming

_log = logging.getLogger("signup_verification.api.auth")

GUARDED_TARGETS = frozenset({"create_verification", "dispatch", "reconcile", "status"})
SIGNATURE_HEADER = "Verify-Signature"  # ours: RFC 9421 registered `Signature` with another syntax
LEGACY_SIGNATURE_HEADER = "Signature"  # accepted for one release (docs/security.md)
GOOGLE_ISSUERS = frozenset({"https://accounts.google.com", "accounts.google.com"})
CLOCK_SKEW = 60  # seconds of leeway on the identity token's expiry


@dataclass(frozen=True)
class SigningKey:
    target: str | None  # None: every signed target; else only this one (`target:key_id:secret`)
    key_id: str
    secret: bytes = dataclasses.field(repr=False)


@dataclass(frozen=True)
class AuthConfig:
    production: bool
    signing_keys: tuple[SigningKey, ...] = ()
    signed_targets: frozenset[str] = frozenset({"create_verification"})
    allowed_invokers: frozenset[str] = frozenset()
    tolerance_seconds: int = 300

    def secrets_for(self, target: str) -> list[bytes]:
        return [k.secret for k in self.signing_keys if k.target in (None, target)]

    def __repr__(self) -> str:  # never the key material
        return (
            f"AuthConfig(production={self.production}, keys={[k.key_id for k in self.signing_keys]}, "
            f"signed_targets={sorted(self.signed_targets)}, allowed_invokers={sorted(self.allowed_invokers)})"
        )


def parse_signing_keys(spec: str) -> tuple[SigningKey, ...]:
    """`[target:]key_id:base64url-secret[,...]` (the format of TOKEN_KEYS; `verifyctl new-key` prints
    one). With a target the key signs for that target only, so one caller's key cannot run another's."""
    keys = []
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        target = None
        if item.count(":") == 2:
            target, _, item = item.partition(":")
            if target not in GUARDED_TARGETS:
                raise ConfigError(f"REQUEST_SIGNING_KEYS entry for {target!r}: not a guarded target")
        key_id, sep, encoded = item.partition(":")
        try:
            secret = base64.b64decode(encoded + "=" * (-len(encoded) % 4), altchars=b"-_", validate=True)
        except ValueError:
            secret = b""
        if not sep or not key_id or len(secret) < 32:
            raise ConfigError(
                f"REQUEST_SIGNING_KEYS entry {key_id or '?'!r} must be key_id:base64url-secret of 32+ bytes"
            )
        keys.append(SigningKey(target, key_id, secret))
    return tuple(keys)


def canonical(method: str, target: str, idempotency_key: str | None, timestamp: int, body: bytes) -> bytes:
    """What Verify-Signature's MAC covers: one field per line, the body by its SHA-256."""
    digest = hashlib.sha256(body).hexdigest()
    return f"v1\n{method.upper()}\n{target}\n{idempotency_key or ''}\n{timestamp}\n{digest}".encode()


def sign_request(
    secret: bytes, method: str, target: str, idempotency_key: str | None, body: bytes, timestamp: int | None = None
) -> str:
    """The Verify-Signature header value a caller sends (also what the tests and the docs' example use)."""
    t = int(time.time()) if timestamp is None else timestamp
    mac = hmac.new(secret, canonical(method, target, idempotency_key, t, body), hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


def sign(secret: bytes, body: bytes, timestamp: int | None = None) -> str:
    """The legacy Signature header value (one release of overlap): the MAC covers only t and the body."""
    t = int(time.time()) if timestamp is None else timestamp
    return f"t={t},v1={hmac.new(secret, f'{t}.'.encode() + body, hashlib.sha256).hexdigest()}"


# -- the checks ------------------------------------------------------------------------------------------
def _unauthenticated(detail: str, scheme: str) -> problems.Problem:
    return problems.Problem(
        401,
        "unauthenticated",
        "Authentication required",
        detail,
        headers={"WWW-Authenticate": scheme, "Cache-Control": "no-store"},
    )


def _parse(header: str | None) -> tuple[int | None, list[bytes]]:
    timestamp, candidates = None, []
    for part in (header or "").split(","):
        name, _, value = part.strip().partition("=")
        if name == "t" and value.isascii() and value.isdigit() and len(value) <= 12:  # '²'.isdigit() is True
            timestamp = int(value)
        elif name == "v1" and len(value) == 64:
            candidates.append(value.lower().encode())
    return timestamp, candidates


def _match(secrets: list[bytes], signed: bytes, candidates: list[bytes]) -> bytes | None:
    matched = None
    for secret in secrets:  # every key, every candidate: no early exit on a match
        expected = hmac.new(secret, signed, hashlib.sha256).hexdigest().encode()
        for candidate in candidates:
            if hmac.compare_digest(expected, candidate):
                matched = candidate
    return matched


def verify_request(
    config: AuthConfig, target: str, request: Incoming, now: float | None = None
) -> tuple[bytes, int] | None:
    """(the matched MAC, its t) when Verify-Signature is valid for this request and target, else None."""
    timestamp, candidates = _parse(request.headers.get(SIGNATURE_HEADER))
    now = time.time() if now is None else now
    if timestamp is None or not candidates or abs(now - timestamp) > config.tolerance_seconds:
        return None
    signed = canonical(request.method, target, request.headers.get("Idempotency-Key"), timestamp, request.body)
    matched = _match(config.secrets_for(target), signed, candidates)
    return (matched, timestamp) if matched is not None else None


def verify_signature(
    config: AuthConfig, header: str | None, body: bytes, now: float | None = None, target: str | None = None
) -> bool:
    """The legacy Signature header (old semantics: t and body only; a scoped key still only for its target)."""
    if not header:
        return False
    timestamp, candidates = None, []
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        if name == "t" and value.isascii() and value.isdigit() and len(value) <= 12:  # '²'.isdigit() is True
            timestamp = int(value)
        elif name == "v1" and len(value) == 64:
            candidates.append(value.lower().encode())
    now = time.time() if now is None else now
    if timestamp is None or not candidates or abs(now - timestamp) > config.tolerance_seconds:
        return False
    signed = f"{timestamp}.".encode() + body
    matched = False
    secrets = config.secrets_for(target) if target else [k.secret for k in config.signing_keys]
    for secret in secrets:  # every key, every candidate: no early exit
        expected = hmac.new(secret, signed, hashlib.sha256).hexdigest().encode()
        for candidate in candidates:
            matched |= hmac.compare_digest(expected, candidate)
    return matched


def platform_principal(config: AuthConfig, headers: Mapping[str, str], now: float | None = None) -> str | None:
    """The principal of the ID token Cloud Run verified and passed on, or None.

    X-Serverless-Authorization wins over Authorization (Cloud Run authorizes with it when both are
    sent). The signature was checked by the platform and removed; the claims are read, not trusted
    beyond what the platform guarantees: Google issuer, not expired, an allowed principal."""
    value = headers.get("X-Serverless-Authorization") or headers.get("Authorization") or ""
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or token.count(".") not in (1, 2):
        return None
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: claims nested 5,000 deep
        return None
    if not isinstance(claims, dict) or not isinstance(claims.get("iss"), str) or claims["iss"] not in GOOGLE_ISSUERS:
        return None
    exp = claims.get("exp")
    now = time.time() if now is None else now
    if not isinstance(exp, (int, float)) or exp + CLOCK_SKEW < now:
        return None
    principal = claims.get("email") or claims.get("sub")
    if not isinstance(principal, str) or not principal:
        return None
    if config.allowed_invokers and principal.lower() not in config.allowed_invokers:
        return None
    return principal


# first_use(mac, expires_at_unix) -> True the first time a signature is presented (signature_replay)
FirstUse = Callable[[bytes, int], bool]


def _signed(config: AuthConfig, target: str, request: Incoming, first_use: FirstUse | None) -> str | None:
    """'signature' / 'legacy-signature' when the request is signed, 'replay' for a reused one, else None."""
    if request.headers.get(SIGNATURE_HEADER):
        verified = verify_request(config, target, request)
        if verified is None:
            return None
        mac, timestamp = verified
        if first_use is not None and not first_use(mac, timestamp + config.tolerance_seconds):
            return "replay"
        return "signature"
    if verify_signature(config, request.headers.get(LEGACY_SIGNATURE_HEADER), request.body, target=target):
        _log.info("accepted %s: legacy Signature header (deprecated)", target)
        return "legacy-signature"
    return None


def authorize(config: AuthConfig, target: str, request: Incoming, first_use: FirstUse | None = None) -> str:
    """How the caller was accepted ('signature', 'legacy-signature', 'platform' or 'open'); raises a
    401 Problem otherwise."""
    if target not in GUARDED_TARGETS:
        return "open"
    if target in config.signed_targets:
        how = _signed(config, target, request, first_use)
        if how in ("signature", "legacy-signature"):
            return how
        reason = "replay" if how == "replay" else "signature"
        _log.warning(
            "refused %s: %s request signature",
            target,
            "reused" if how == "replay" else "missing or invalid",
            extra={"json_fields": {"event": "caller_refused", "target": target, "reason": reason}},
        )
        raise _unauthenticated(
            "Sign the request once: Verify-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of the canonical "
            "request> (docs/security.md); a signature is accepted once.",
            SIGNATURE_HEADER,
        )
    if not config.production:
        return "open"
    if platform_principal(config, request.headers) is not None:
        return "platform"
    _log.warning(
        "refused %s: no accepted platform identity",
        target,
        extra={"json_fields": {"event": "caller_refused", "target": target, "reason": "identity"}},
    )
    raise _unauthenticated("Call this function with a Google-signed ID token of an allowed service account.", "Bearer")
