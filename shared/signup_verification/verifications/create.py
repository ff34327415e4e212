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
from . import abuse
from .tokens import Keyring, new_nonce

IDEMPOTENCY_SCOPE = "create_verification"
_CREATE_SQL = """
SELECT outcome, status_code, body, retry_after FROM create_verification(
    :scope, :key, :fingerprint, make_interval(secs => :idem_ttl),
    :id, :account_id, :channel, :destination, :purpose, :locale,
    :template_version, :key_id, :nonce, :digest,
    make_interval(secs => :ttl), :max_confirm, :max_attempts,
    :rate_limit, interval '1 hour', make_interval(secs => :spacing),
    :destination_key, :prefix_key, :country, :client_key,
    :per_account, :per_prefix, :per_country, :per_client)
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
    abuse: abuse.AbuseConfig = field(default_factory=abuse.AbuseConfig)  # verifications/abuse.py


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
    limits = _abuse_limits(config, keyring, request)  # may raise 422: nothing written
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
        rate_limit=config.rate_limit_per_hour, spacing=config.rate_limit_spacing_seconds, **limits,
    )[0]
    outcome, status, body, retry_after = row
    if outcome == "created":
        return CreateResult(201, body)
    if outcome == "replayed":
        return CreateResult(status, body, replayed=True, headers={"Idempotent-Replayed": "true"})
    if outcome == "mismatch":
        raise Problem(422, "idempotency-key-reused", "Idempotency-Key reused with a different request",
                      "This Idempotency-Key was already used with another payload; use a new key.")
    retry_after = abuse.retry_after(config.abuse, retry_after)
    raise Problem(429, "rate-limited", "Too many verifications for this destination",
                  f"Retry after {retry_after} seconds.", headers={"Retry-After": str(retry_after)})


def _abuse_limits(config: CreateConfig, keyring: Keyring, request: CreateVerificationRequest) -> dict[str, Any]:
    """The SMS policy check and the velocity limits' keys (issue 15; verifications/abuse.py)."""
    policy = config.abuse
    try:
        country = abuse.check_sms_number(policy, request.destination) if request.channel == "sms" else None
    except abuse.Refused as refused:
        raise Problem(422, refused.slug, refused.title, refused.detail,
                      [{"pointer": "#/destination", "detail": refused.field_detail}]) from None
    # The keyed digest uses the token keyring's signing key under its own label: no new secret to
    # provision; a key rotation starts the windows afresh, which costs at most one hour of history.
    keys = abuse.limit_keys(keyring.primary.secret, policy, request.channel, request.destination,
                            request.client_ip, country)
    return dict(destination_key=keys.destination, prefix_key=keys.prefix, country=keys.country,
                client_key=keys.client, per_account=policy.per_account_per_hour,
                per_prefix=policy.per_prefix_per_hour, per_country=policy.per_country_per_hour,
                per_client=policy.per_client_per_hour)
