"""Creating a verification: token material, idempotency and the outbox row in one transaction.

The whole write is one call of the SQL function `create_verification` (verifications/functions/30_create.sql):
one round trip, one transaction. This module prepares what only Python can (the keyed digest) and
returns what happened as an outcome. Once a verification is created (committed), it nudges dispatch
(outbox/nudge.py: a named task beside the answer, never in its way; a no-op unless DISPATCH_NUDGE_URL
is set). It knows nothing of HTTP (api/create.py renders each outcome) nor of the template catalogue
(the caller passes the resolved template version and locale in `NewVerification`).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, replace
from typing import Any

from ..outbox import nudge
from ..platform.catalogue import catalogue
from ..platform.channels import code_channels
from ..platform.database import Database
from ..platform.ids import uuid7
from . import abuse
from .channel_policy import STEP3, Fallback, channel_digest, later_step_parameters
from .config import CreateConfig
from .tokens import Keyring, code_entry_url, new_nonce

_SQL = catalogue("verifications")

_log = logging.getLogger("signup_verification.verifications.create")

IDEMPOTENCY_SCOPE = "create_verification"
_CREATE = _SQL["create"]
# where a refusal of step 3 points: the request names it in `steps` only
_STEP3_POINTER = "#/steps/2/"
# create_verification_v2's `field` of a suppressed destination, as a request pointer
_SUPPRESSED_POINTERS = {"fallback": "#/fallback/destination", "step3": _STEP3_POINTER + "destination"}


@dataclass(frozen=True)
class NewVerification:
    """A validated request with its template resolved (the caller owns the catalogue)."""

    account_id: str
    channel: str
    destination: str
    purpose: str
    locale: str
    template_version: str
    fingerprint: bytes  # what makes two requests 'the same' for one idempotency key
    client_ip: str | None = None  # the end user's address as the site saw it (velocity limit only)
    fallback: Fallback | None = None  # the channel policy (channel_policy.py): step 2
    step3: Fallback | None = None  # step 3 (only after a step 2)
    return_url: str | None = None  # checked at the edge (api/return_url.py); the pages link to it


@dataclass(frozen=True)
class Verification:
    """The created verification as stored with the idempotency key: ISO-8601 UTC timestamps."""

    verification_id: str
    account_id: str
    channel: str
    status: str
    expires_at: str
    created_at: str
    fallback: dict[str, Any] | None = None  # {channel, after_seconds, policy}; never the destination
    steps: list[dict[str, Any]] | None = None  # [{channel, after_seconds}] of every step, with a third
    code_entry_url: str | None = None  # the hosted code-entry page, when a code channel is among the channels

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> Verification:
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})


@dataclass(frozen=True)
class Created:
    verification: Verification
    kind: str = "created"


@dataclass(frozen=True)
class Replayed:
    """The key was used before with the same request: the first request's verification."""

    verification: Verification
    kind: str = "replayed"


@dataclass(frozen=True)
class KeyReused:
    """The key was used before with a different request: nothing was written."""

    kind: str = "key_reused"


@dataclass(frozen=True)
class Refused:
    """The destination is not allowed (a number's country or type), or the channel is not offered here:
    nothing was written."""

    slug: str
    title: str
    detail: str
    field_detail: str
    pointer: str = "#/destination"  # or '#/fallback/destination', '#/steps/2/destination'
    kind: str = "refused"


@dataclass(frozen=True)
class Invalid:
    """The request is well-formed but the policy refuses it (a fallback due after the verification
    expires): nothing was written."""

    pointer: str
    detail: str
    kind: str = "invalid"


@dataclass(frozen=True)
class RateLimited:
    retry_after: int  # seconds until the destination's limit frees up
    kind: str = "rate_limited"


@dataclass(frozen=True)
class Suppressed:
    """A delivery to this exact destination failed for the recipient's fault (SUPPRESSED_ANSWER=refuse):
    nothing was written."""

    pointer: str = "#/destination"  # or '#/fallback/destination', '#/steps/2/destination'
    kind: str = "suppressed"


CreateOutcome = Created | Replayed | KeyReused | Refused | Invalid | RateLimited | Suppressed


def create(
    db: Database, config: CreateConfig, keyring: Keyring, new: NewVerification, idempotency_key: str
) -> CreateOutcome:
    asked = [(new.channel, "#/channel")]
    asked += [(new.fallback.channel, "#/fallback/channel")] if new.fallback else []
    asked += [(new.step3.channel, _STEP3_POINTER + "channel")] if new.step3 else []
    for channel, pointer in asked:
        if not config.offers(channel):  # not set up here: refused, nothing written
            refused = Refused(
                "channel-not-offered",
                "This channel is not offered",
                f"This service does not send {channel} messages: its operator has not set the channel up. "
                "Use another channel.",
                "channel not offered",
                pointer,
            )
            _logged(refused, new.channel)
            return refused
    for step, pointer in ((new.fallback, "#/fallback/after_seconds"), (new.step3, _STEP3_POINTER + "after_seconds")):
        if step is not None and step.after_seconds >= config.ttl_seconds:
            # a step due at or after expiry could never be sent: refused, the limit named
            invalid = Invalid(pointer, f"must be less than the verification's lifetime ({config.ttl_seconds} s)")
            _logged(invalid, new.channel)
            return invalid
    verification_id = uuid7()  # time-ordered: inserts land on the indexes' rightmost pages
    key = keyring.primary
    nonce = new_nonce()
    try:
        limits = _abuse_limits(config, keyring, new)
        # the later steps' secret digests, destination checks and limit keys
        limits |= later_step_parameters(config.abuse, key, new.fallback, verification_id, nonce, config.code_digits)
        limits |= later_step_parameters(
            config.abuse,
            key,
            new.step3,
            verification_id,
            nonce,
            config.code_digits,
            STEP3,
            _STEP3_POINTER + "destination",
        )
    except abuse.Refused as refused:
        outcome: CreateOutcome = Refused(
            refused.slug, refused.title, refused.detail, refused.field_detail, refused.pointer
        )
        _logged(outcome, new.channel)
        return outcome
    digest = channel_digest(key, new.channel, verification_id, nonce, config.code_digits)
    outcome_kind, data, retry_after = db.run(
        _CREATE,
        scope=IDEMPOTENCY_SCOPE,
        key=idempotency_key,
        fingerprint=new.fingerprint,
        idem_ttl=config.idempotency_ttl_seconds,
        id=verification_id,
        account_id=new.account_id,
        channel=new.channel,
        destination=new.destination,
        purpose=new.purpose,
        locale=new.locale,
        template_version=new.template_version,
        key_id=key.key_id,
        nonce=nonce,
        digest=digest,
        ttl=config.ttl_seconds,
        max_confirm=config.max_confirm_attempts,
        max_attempts=config.max_delivery_attempts,
        rate_limit=config.rate_limit_per_hour,
        spacing=config.rate_limit_spacing_seconds,
        **limits,
        return_url=new.return_url,
        **_suppression_keys(config, keyring, new),
        suppressed_answer=config.abuse.suppressed_answer,
    )[0]
    match outcome_kind:  # create_verification's outcomes
        case "created":  # committed: its intent is there to claim, so dispatch may start now
            nudge.after_commit(config.nudge)
            outcome = Created(_answered(config, keyring, new, data))
        case "replayed":
            outcome = Replayed(_answered(config, keyring, new, data))
        case "mismatch":
            outcome = KeyReused()
        case "suppressed":
            field = str(data.get("field")) if data else ""
            outcome = Suppressed(_SUPPRESSED_POINTERS.get(field, "#/destination"))
        case "rate_limited":
            outcome = RateLimited(abuse.retry_after(config.abuse, int(retry_after)))
        case _:
            raise ValueError(f"create_verification answered an unknown outcome {outcome_kind!r}")
    _logged(outcome, new.channel)
    return outcome


def _answered(config: CreateConfig, keyring: Keyring, new: NewVerification, data: dict[str, Any]) -> Verification:
    """The verification as answered: the stored record, and the code-entry page's URL when a code
    channel is among the channels (a replay is the same request, so the same channels). Under a key rotated in
    since the first answer, a replay's URL is another handle of the same page: every key opens it."""
    verification = Verification.from_record(data)
    if not code_channels(new.channel, *(s.channel for s in (new.fallback, new.step3) if s is not None)):
        return verification
    url = code_entry_url(config.link_base, keyring.primary, uuid.UUID(verification.verification_id))
    return replace(verification, code_entry_url=url)


def _abuse_limits(config: CreateConfig, keyring: Keyring, new: NewVerification) -> dict[str, Any]:
    """The phone number policy check (raises abuse.Refused) and the velocity limits' keys."""
    policy = config.abuse
    country = abuse.check_phone_number(policy, new.channel, new.destination)
    # The keyed digest uses the token keyring's signing key under its own label: no new secret to
    # provision; a key rotation starts the windows afresh, which costs at most one hour of history.
    keys = abuse.limit_keys(keyring.primary.secret, policy, new.channel, new.destination, new.client_ip, country)
    return dict(
        destination_key=keys.destination,
        exact_key=keys.exact,
        prefix_key=keys.prefix,
        country=keys.country,
        client_key=keys.client,
        per_account=policy.per_account_per_hour,
        per_prefix=policy.per_prefix_per_hour,
        per_country=policy.per_country_per_hour,
        per_client=policy.per_client_per_hour,
    )


def _suppression_keys(config: CreateConfig, keyring: Keyring, new: NewVerification) -> dict[str, list[bytes] | None]:
    """The destinations' suppression keys under every key of the ring, for the suppression check."""
    secrets = [k.secret for k in keyring.keys]
    primary = abuse.destination_keys(secrets, config.abuse, new.channel, new.destination)
    keys: dict[str, list[bytes] | None] = dict(suppression_keys=primary.exact, alias_suppression_keys=primary.alias)
    for prefix, step in (("fallback", new.fallback), (STEP3, new.step3)):
        found = abuse.destination_keys(secrets, config.abuse, step.channel, step.destination) if step else None
        keys[f"{prefix}_suppression_keys"] = found.exact if found else None
        keys[f"{prefix}_alias_suppression_keys"] = found.alias if found else None
    return keys


def _logged(outcome: CreateOutcome, channel: str) -> None:
    """One structured line per outcome: never the destination, the token or the idempotency key."""
    verification = getattr(outcome, "verification", None)
    fields = {
        "event": "create",
        "outcome": outcome.kind,
        "channel": channel,
        "verification_id": verification.verification_id if verification else None,
    }
    if isinstance(outcome, RateLimited):
        fields["retry_after"] = outcome.retry_after
    _log.info("create %s", outcome.kind, extra={"json_fields": fields})
