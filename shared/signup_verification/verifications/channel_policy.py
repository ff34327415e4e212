"""Channel policy: an optional fallback on the other message channel, encoded in the records.

    single    one channel (no fallback)
    fallback  the primary now, the other channel `after_seconds` later unless the verification was
              confirmed (or died) first; brought forward at once when the primary fails for good
    both      `after_seconds` 0: both channels at once

The database names the policy from the fallback (channel_policy(), recorded on the intents).

One verification, one secret per channel, both derived from the verification's one nonce
(tokens.py): the email carries the link, the SMS the code. Only their keyed digests are stored
(verifications.token_digest for the primary channel, fallback_digest for the fallback's). The
fallback's destination passes the same abuse checks as a primary one (abuse.py) and counts against
its own velocity limits (create_verification).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from . import abuse
from .config import AbuseConfig
from .tokens import TokenKey


@dataclass(frozen=True)
class Fallback:
    """A validated fallback: the other channel, a normalised destination, 0 <= after_seconds < ttl."""

    channel: str
    destination: str
    after_seconds: int

    def __repr__(self) -> str:  # never the destination
        return f"Fallback({self.channel!r}, after_seconds={self.after_seconds})"


def channel_digest(key: TokenKey, channel: str, verification_id: uuid.UUID, nonce: bytes, code_digits: int) -> bytes:
    """The keyed digest confirmation matches for this channel's secret (link or code)."""
    if channel == "email":
        return key.link_digest(key.link_token(verification_id, nonce))
    return key.code_digest(verification_id, key.sms_code(verification_id, nonce, code_digits))


NO_FALLBACK: dict[str, Any] = dict(
    fallback_channel=None,
    fallback_destination=None,
    fallback_after=None,
    fallback_digest=None,
    fallback_destination_key=None,
    fallback_prefix_key=None,
    fallback_country=None,
    fallback_exact_key=None,
)


def fallback_parameters(
    policy: AbuseConfig,
    key: TokenKey,
    fallback: Fallback | None,
    verification_id: uuid.UUID,
    nonce: bytes,
    code_digits: int,
) -> dict[str, Any]:
    """verifications/queries.sql:create's fallback parameters; raises abuse.Refused (pointing at the fallback) first."""
    if fallback is None:
        return NO_FALLBACK
    try:
        country = abuse.check_sms_number(policy, fallback.destination) if fallback.channel == "sms" else None
    except abuse.Refused as refused:
        refused.pointer = "#/fallback/destination"
        raise
    keys = abuse.limit_keys(key.secret, policy, fallback.channel, fallback.destination, None, country)
    return dict(
        fallback_channel=fallback.channel,
        fallback_destination=fallback.destination,
        fallback_after=fallback.after_seconds,
        fallback_digest=channel_digest(key, fallback.channel, verification_id, nonce, code_digits),
        fallback_destination_key=keys.destination,
        fallback_prefix_key=keys.prefix,
        fallback_country=keys.country,
        fallback_exact_key=keys.exact,
    )
