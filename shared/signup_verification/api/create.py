"""The create endpoint's edge: a validated request becomes a `NewVerification` (the template
catalogue is resolved here, above the domain), and each create outcome is rendered here, once.

Replays are rendered from the stored outcome by the same code as the first answer, so they are
byte-identical to it (plus `Idempotent-Replayed: true`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from ..delivery import templates
from ..platform.database import Database
from ..verifications import create as domain
from ..verifications.channel_policy import Fallback
from ..verifications.config import CreateConfig
from ..verifications.tokens import Keyring
from .models import CreateVerificationRequest
from .problems import Problem, bad_request


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def fingerprint(request: CreateVerificationRequest) -> bytes:
    """What makes two requests 'the same' for an idempotency key: the normalised payload."""
    payload = request.model_dump()
    if payload.get("fallback") is None:
        # absent optional fields stay out of the fingerprint: a request without them matches the keys stored
        # for requests that never had them
        payload.pop("fallback", None)
    if payload.get("return_url") is None:
        payload.pop("return_url", None)
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).digest()


def new_verification(request: CreateVerificationRequest) -> domain.NewVerification:
    version = templates.current_version(request.template)
    return domain.NewVerification(
        account_id=request.account_id,
        channel=request.channel,
        destination=request.destination,
        purpose=request.template,
        locale=templates.resolve_locale(version, request.locale),
        template_version=version,
        fingerprint=fingerprint(request),
        client_ip=request.client_ip,
        fallback=_fallback(request),
        return_url=request.return_url,
    )


def _fallback(request: CreateVerificationRequest) -> Fallback | None:
    f = request.fallback
    return Fallback(f.channel, f.destination, f.after_seconds) if f is not None else None


def _verification_body(v: domain.Verification) -> dict[str, Any]:
    # This key order is the one the answers always had (PostgreSQL's jsonb order): keep it.
    body: dict[str, Any] = {
        "status": v.status,
        "channel": v.channel,
        "account_id": v.account_id,
        "created_at": v.created_at,
        "expires_at": v.expires_at,
        "verification_id": v.verification_id,
    }
    if v.fallback is not None:  # only when asked for
        body["fallback"] = {k: v.fallback[k] for k in ("channel", "after_seconds", "policy")}
    return body


def answer(outcome: domain.CreateOutcome) -> Answer:
    """The one HTTP rendering of each create outcome; raises the Problem for a refusal."""
    if isinstance(outcome, domain.Created):
        return Answer(201, _verification_body(outcome.verification))
    if isinstance(outcome, domain.Replayed):
        return Answer(201, _verification_body(outcome.verification), {"Idempotent-Replayed": "true"})
    if isinstance(outcome, domain.KeyReused):
        raise Problem(
            422,
            "idempotency-key-reused",
            "Idempotency-Key reused with a different request",
            "This Idempotency-Key was already used with another payload; use a new key.",
        )
    if isinstance(outcome, domain.Refused):
        raise Problem(
            422,
            outcome.slug,
            outcome.title,
            outcome.detail,
            [{"pointer": outcome.pointer, "detail": outcome.field_detail}],
        )
    if isinstance(outcome, domain.Suppressed):
        raise Problem(
            422,
            "destination-suppressed",
            "This destination cannot receive messages",
            "A previous message to this destination was reported permanently undeliverable (a hard "
            "bounce or an invalid number). Use another destination, or ask the operator to clear it.",
            [{"pointer": outcome.pointer, "detail": "suppressed after a permanent delivery failure"}],
        )
    raise Problem(
        429,
        "rate-limited",
        "Too many verifications for this destination",
        f"Retry after {outcome.retry_after} seconds.",
        headers={"Retry-After": str(outcome.retry_after)},
    )


def create_verification(
    db: Database,
    config: CreateConfig,
    keyring: Keyring,
    request: CreateVerificationRequest,
    idempotency_key: str,
) -> Answer:
    """Create (or replay) and render: what the endpoint, the tests' factories and the tools call."""
    _check_fallback_timing(config, request)
    return answer(domain.create(db, config, keyring, new_verification(request), idempotency_key))


def _check_fallback_timing(config: CreateConfig, request: CreateVerificationRequest) -> None:
    """A fallback due at or after expiry could never be sent: refuse it, name the limit."""
    if request.fallback is not None and request.fallback.after_seconds >= config.ttl_seconds:
        raise bad_request(
            "The body failed validation.",
            [
                {
                    "pointer": "#/fallback/after_seconds",
                    "detail": f"must be less than the verification's lifetime ({config.ttl_seconds} s)",
                }
            ],
        )
