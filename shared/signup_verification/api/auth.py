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
  (default `create_verification`) require `Verify-Signature: t=<unix seconds>,v2=<hex HMAC-SHA256
  of the canonical request>` (api/request_signatures.py: method, target, path, query,
  Idempotency-Key, t, body SHA-256) under one of the target's keys, within
  `SIGNATURE_TOLERANCE_SECONDS` (300) of now, compared in constant time, in every environment, and
  each request is accepted once, whichever of its signatures matched (`signature_replay`, a table:
  the window spans instances). Such a target is typically public, so a platform identity header is
  *not* enough for it: anyone can write one, nobody verified it.
* the older `v1=` entries (no path, no query), only on `/` without a query, where they bind as
  much; each use is logged as `deprecated_signature`. A `Signature` header is no signature here.

`confirm_verification` is public by design (people open links): never guarded here; its tokens,
attempt limits and rate limits are its protection. A captured signature cannot be replayed: not
with another Idempotency-Key (a new message), not against another target (a create signature
running a reconcile), not on another path (a read of another verification), not twice, not with
fewer of its signatures. A caller's retry signs again (a new `t`).
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Callable, Mapping

from ..platform.catalogue import catalogue
from ..platform.config import Target
from ..platform.database import Database
from . import problems
from . import request_signatures as signatures
from .config import GUARDED_TARGETS, AuthConfig
from .http import Incoming

_log = logging.getLogger("signup_verification.api.auth")

SIGNATURE_HEADER = "Verify-Signature"  # ours: RFC 9421 registered `Signature` with another syntax
GOOGLE_ISSUERS = frozenset({"https://accounts.google.com", "accounts.google.com"})
CLOCK_SKEW = 60  # seconds of leeway on the identity token's expiry


def signed_request(target: str, request: Incoming) -> signatures.SignedRequest:
    return signatures.SignedRequest(
        request.method, target, request.path, request.query, request.headers.get("Idempotency-Key"), request.body
    )


def sign_request(
    secret: bytes,
    method: str,
    target: str,
    idempotency_key: str | None,
    body: bytes,
    timestamp: int | None = None,
    *,
    path: str = "/",
    query: str = "",
) -> str:
    """The Verify-Signature header value a caller sends (v2; also what the tests and the docs use)."""
    request = signatures.SignedRequest(method, target, path, query, idempotency_key, body)
    return signatures.sign_v2([secret], request, timestamp)


def verify_request(
    config: AuthConfig, target: str, request: Incoming, now: float | None = None
) -> signatures.Verified | None:
    """Which signature of Verify-Signature holds for this request and target, or None."""
    header = request.headers.get(SIGNATURE_HEADER)
    return signatures.verify(
        config.secrets_for(target), config.tolerance_seconds, header, signed_request(target, request), now
    )


def _unauthenticated(detail: str, scheme: str) -> problems.Problem:
    return problems.Problem(
        401,
        "unauthenticated",
        "Authentication required",
        detail,
        headers={"WWW-Authenticate": scheme, "Cache-Control": "no-store"},
    )


def platform_principal(
    config: AuthConfig, headers: Mapping[str, str], now: float | None = None, invokers: frozenset[str] | None = None
) -> str | None:
    """The principal of the ID token Cloud Run verified and passed on, or None.

    X-Serverless-Authorization wins over Authorization (Cloud Run authorizes with it when both are
    sent). The signature was checked by the platform and removed; the claims are read, not trusted
    beyond what the platform guarantees: Google issuer, not expired, an allowed principal: one of
    `invokers` when the caller names them (an empty set: nobody), else of ALLOWED_INVOKERS (unset: any)."""
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
    if invokers is not None:
        return principal if principal.lower() in invokers else None
    if config.allowed_invokers and principal.lower() not in config.allowed_invokers:
        return None
    return principal


# first_use(request digest, expires_at_unix) -> True the first time a signed request is presented
FirstUse = Callable[[bytes, int], bool]
_REMEMBER = catalogue("platform")["remember_signature"]


def first_use(db: Database) -> FirstUse:
    """The replay guard authorize() asks: a signed request is accepted once inside its window (a
    table, platform/queries/signatures.sql:remember_signature, so the window spans instances)."""

    def remember(digest: bytes, expires_at: int) -> bool:
        """`digest`: the request's name (request_signatures.replay_digest), whichever MAC signed it."""
        return bool(db.run(_REMEMBER, digest=digest, expires_at=expires_at))

    return remember


_REFUSALS = {
    "signature": "missing or invalid request signature",
    "replay": "reused request signature",
}


def _deprecated(target: str, scheme: str) -> None:
    _log.warning(
        "accepted %s: %s signature (deprecated: sign with Verify-Signature v2)",
        target,
        scheme,
        extra={"json_fields": {"event": "deprecated_signature", "target": target, "scheme": scheme}},
    )


def _once(first_use: FirstUse | None, digest: bytes, expires_at: int) -> bool:
    return first_use is None or first_use(digest, expires_at)


def _signed(config: AuthConfig, target: str, request: Incoming, first_use: FirstUse | None) -> tuple[str | None, str]:
    """(how it was accepted, "") or (None, the refusal reason): one record per request, whichever
    of its signatures matched, so neither the request nor any subset of its signatures runs twice."""
    verified = verify_request(config, target, request)
    if verified is None:
        return None, "signature"
    if not _once(first_use, verified.digest, verified.timestamp + config.tolerance_seconds):
        return None, "replay"
    if verified.scheme == "v1":
        _deprecated(target, "v1")
    return ("signature" if verified.scheme == "v2" else "signature-v1"), ""


def authorize(
    config: AuthConfig,
    target: Target,
    request: Incoming,
    first_use: FirstUse | None = None,
    invokers: frozenset[str] | None = None,
) -> str:
    """How the caller was accepted ('signature', 'signature-v1', 'platform' or 'open'); raises a 401 Problem otherwise. `invokers`: the principals this request's path accepts,
    instead of ALLOWED_INVOKERS (dispatch: the scheduler's on the scheduled path, the fan-out's on
    the fan-out path)."""
    if target not in GUARDED_TARGETS:
        return "open"
    if target in config.signed_targets:
        how, reason = _signed(config, target, request, first_use)
        if how is not None:
            return how
        _log.warning(
            "refused %s: %s",
            target,
            _REFUSALS[reason],
            extra={"json_fields": {"event": "caller_refused", "target": target, "reason": reason}},
        )
        detail = (
            "Sign the request once: Verify-Signature: t=<unix seconds>,v2=<hex HMAC-SHA256 of the canonical "
            "request> (docs/security.md); a request is accepted once."
        )
        raise _unauthenticated(detail, SIGNATURE_HEADER)
    if not config.production:
        return "open"
    if platform_principal(config, request.headers, invokers=invokers) is not None:
        return "platform"
    _log.warning(
        "refused %s: no accepted platform identity",
        target,
        extra={"json_fields": {"event": "caller_refused", "target": target, "reason": "identity"}},
    )
    raise _unauthenticated("Call this function with a Google-signed ID token of an allowed service account.", "Bearer")
