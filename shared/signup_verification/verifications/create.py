"""Creating a verification: token material, idempotency and the outbox row in one transaction.

The whole write is one call of the SQL function `create_verification` (sql/002): one round trip,
one transaction. This module prepares what only Python can (the keyed digest, the request
fingerprint) and maps the function's outcome onto an HTTP answer.
"""
from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from ..delivery import templates
from ..api.models import CreateVerificationRequest
from ..platform.database import Database
from ..api.problems import Problem
from .tokens import Keyring, new_nonce

IDEMPOTENCY_SCOPE = "create_verification"
_CREATE_SQL = """
SELECT outcome, status_code, body, retry_after FROM create_verification(
    :scope, :key, :fingerprint, make_interval(secs => :idem_ttl),
    :id, :account_id, :channel, :destination, :purpose, :locale,
    :template_version, :key_id, :nonce, :digest,
    make_interval(secs => :ttl), :max_confirm, :max_attempts,
    :rate_limit, interval '1 hour', make_interval(secs => :spacing))
"""


@dataclass(frozen=True)
class CreateConfig:
    code_digits: int = 6  # SMS_CODE_DIGITS
    ttl_seconds: int = 600  # VERIFICATION_TTL_SECONDS: ASVS 5.0 6.5.5, out-of-band codes live <= 10 min
    max_confirm_attempts: int = 5  # MAX_CONFIRM_ATTEMPTS
    max_delivery_attempts: int = 5  # MAX_DELIVERY_ATTEMPTS
    idempotency_ttl_seconds: int = 24 * 3600  # IDEMPOTENCY_TTL_SECONDS
    rate_limit_per_hour: int = 5  # RATE_LIMIT_PER_HOUR, per destination
    rate_limit_spacing_seconds: int = 60  # RATE_LIMIT_SPACING_SECONDS


@dataclass(frozen=True)
class CreateResult:
    status: int
    body: dict[str, Any]
    replayed: bool = False
    headers: dict[str, str] = field(default_factory=dict)


def fingerprint(request: CreateVerificationRequest) -> bytes:
    """What makes two requests 'the same' for an idempotency key: the normalised payload."""
    canonical = json.dumps(request.model_dump(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).digest()


def create_verification(db: Database, config: CreateConfig, keyring: Keyring,
                        request: CreateVerificationRequest, idempotency_key: str) -> CreateResult:
    verification_id = uuid.uuid4()
    key = keyring.primary
    nonce = new_nonce()
    if request.channel == "email":
        digest = key.link_digest(key.link_token(verification_id, nonce))
    else:
        digest = key.code_digest(verification_id, key.sms_code(verification_id, nonce, config.code_digits))
    version = templates.current_version(request.template)
    row = db.run(
        _CREATE_SQL,
        scope=IDEMPOTENCY_SCOPE, key=idempotency_key, fingerprint=fingerprint(request),
        idem_ttl=config.idempotency_ttl_seconds, id=verification_id, account_id=request.account_id,
        channel=request.channel, destination=request.destination, purpose=request.template,
        locale=templates.resolve_locale(version, request.locale), template_version=version,
        key_id=key.key_id, nonce=nonce, digest=digest, ttl=config.ttl_seconds,
        max_confirm=config.max_confirm_attempts, max_attempts=config.max_delivery_attempts,
        rate_limit=config.rate_limit_per_hour, spacing=config.rate_limit_spacing_seconds,
    )[0]
    outcome, status, body, retry_after = row
    if outcome == "created":
        return CreateResult(201, body)
    if outcome == "replayed":
        return CreateResult(status, body, replayed=True, headers={"Idempotent-Replayed": "true"})
    if outcome == "mismatch":
        raise Problem(422, "idempotency-key-reused", "Idempotency-Key reused with a different request",
                      "This Idempotency-Key was already used with another payload; use a new key.")
    raise Problem(429, "rate-limited", "Too many verifications for this destination",
                  f"Retry after {retry_after} seconds.", headers={"Retry-After": str(retry_after)})
