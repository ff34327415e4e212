"""What Cloud Run passes on to a function once IAM let a call in: the caller's Google ID token with
its signature removed (auth.py). Production-mode tests send it where a real caller's token would be.
And the schemes a refusal may name in WWW-Authenticate, as docs/openapi.yaml documents them."""

from __future__ import annotations

import base64
import json
import time

import yaml

from support.paths import ROOT

_UNAUTHENTICATED = yaml.safe_load((ROOT / "docs" / "openapi.yaml").read_text())["components"]["responses"][
    "Unauthenticated"
]
AUTH_SCHEMES = frozenset(_UNAUTHENTICATED["headers"]["WWW-Authenticate"]["schema"]["enum"])


def _part(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def cloud_run_identity(
    email: str = "scheduler@p.iam.gserviceaccount.com",
    *,
    exp: float | None = None,
    iss: str = "https://accounts.google.com",
) -> str:
    """The Authorization header value: `Bearer header.claims.` (empty signature)."""
    claims = {
        "iss": iss,
        "aud": "https://function-xyz.a.run.app/",
        "email": email,
        "exp": time.time() + 3600 if exp is None else exp,
    }
    return "Bearer " + _part({"alg": "RS256", "typ": "JWT"}) + "." + _part(claims) + "."


def signed_headers(
    secret: bytes,
    body: bytes,
    *,
    target: str = "create_verification",
    idempotency_key: str | None = None,
    method: str = "POST",
    timestamp: int | None = None,
    path: str = "/",
    query: str = "",
) -> dict[str, str]:
    """The headers a signing caller sends: Verify-Signature over the canonical request (and the key)."""
    from signup_verification.api.auth import sign_request

    signature = sign_request(secret, method, target, idempotency_key, body, timestamp, path=path, query=query)
    headers = {"Verify-Signature": signature}
    if idempotency_key is not None:
        headers["Idempotency-Key"] = idempotency_key
    return headers
