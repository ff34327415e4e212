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
from ..verifications.tokens import Keyring
from .models import CreateVerificationRequest
from .problems import Problem


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def fingerprint(request: CreateVerificationRequest) -> bytes:
    """What makes two requests 'the same' for an idempotency key: the normalised payload."""
    fields = request.model_dump()
    if fields["return_url"] is None:  # issue 12's field: absent, the fingerprint is the one keys stored before it
        del fields["return_url"]
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"))
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
        return_url=request.return_url,
    )


def _verification_body(v: domain.Verification) -> dict[str, Any]:
    # This key order is the one the answers always had (PostgreSQL's jsonb order): keep it.
    return {
        "status": v.status,
        "channel": v.channel,
        "account_id": v.account_id,
        "created_at": v.created_at,
        "expires_at": v.expires_at,
        "verification_id": v.verification_id,
    }


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
            [{"pointer": "#/destination", "detail": outcome.field_detail}],
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
    config: domain.CreateConfig,
    keyring: Keyring,
    request: CreateVerificationRequest,
    idempotency_key: str,
) -> Answer:
    """Create (or replay) and render: what the endpoint, the tests' factories and the tools call."""
    return answer(domain.create(db, config, keyring, new_verification(request), idempotency_key))
