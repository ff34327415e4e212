"""Channel policy: a verification's ordered steps, each on a channel of its own, encoded in the records.

    single    one step
    fallback  step 1 now, each later step `after_seconds` after create unless the verification was
              proved (or ended) first; brought forward at once when the step before it fails for good
    both      a step 2 with `after_seconds` 0: both at once

Step 2 is the fallback (its `after_seconds` names the policy: channel_policy() in the database,
recorded on the intents), step 3 the step after it (at most three steps: api/models.py MAX_STEPS).

One verification, one secret per step, each derived from the verification's one nonce and the step's
channel (tokens.py): the email carries the link, each code channel (SMS, WhatsApp, voice) a code of
its own. Only their keyed digests are stored (verifications.token_digest for step 1, fallback_digest
for step 2, step3_digest for step 3). A later step's destination passes the same abuse checks as a
first one (abuse.py) and counts against its own velocity limits (create_verification_v2).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from ..platform.channels import EMAIL
from . import abuse
from .config import AbuseConfig
from .tokens import TokenKey


@dataclass(frozen=True)
class Fallback:
    """A validated later step (the fallback, or step 3): a channel of its own, a normalised destination,
    0 <= after_seconds < ttl."""

    channel: str
    destination: str
    after_seconds: int

    def __repr__(self) -> str:  # never the destination
        return f"Fallback({self.channel!r}, after_seconds={self.after_seconds})"


def channel_digest(key: TokenKey, channel: str, verification_id: uuid.UUID, nonce: bytes, code_digits: int) -> bytes:
    """The keyed digest confirmation matches for this channel's secret (link or code)."""
    if channel == EMAIL:
        return key.link_digest(key.link_token(verification_id, nonce))
    return key.code_digest(verification_id, key.code(channel, verification_id, nonce, code_digits))


_LATER_STEP_KEYS = (
    "channel",
    "destination",
    "after",
    "digest",
    "destination_key",
    "prefix_key",
    "country",
    "exact_key",
)
# the later steps' parameters of verifications/queries/create.sql:create, by the prefix each takes there
FALLBACK, STEP3 = "fallback", "step3"


def later_step_parameters(
    policy: AbuseConfig,
    key: TokenKey,
    step: Fallback | None,
    verification_id: uuid.UUID,
    nonce: bytes,
    code_digits: int,
    prefix: str = FALLBACK,
    pointer: str = "#/fallback/destination",
) -> dict[str, Any]:
    """verifications/queries/create.sql:create's parameters of one later step (step 2: `fallback_*`, step 3:
    `step3_*`), all None without it; raises abuse.Refused (pointing at `pointer`) first."""
    if step is None:
        return {f"{prefix}_{name}": None for name in _LATER_STEP_KEYS}
    try:
        country = abuse.check_phone_number(policy, step.channel, step.destination)
    except abuse.Refused as refused:
        refused.pointer = pointer
        raise
    keys = abuse.limit_keys(key.secret, policy, step.channel, step.destination, None, country)
    values = (
        step.channel,
        step.destination,
        step.after_seconds,
        channel_digest(key, step.channel, verification_id, nonce, code_digits),
        keys.destination,
        keys.prefix,
        keys.country,
        keys.exact,
    )
    return {f"{prefix}_{name}": value for name, value in zip(_LATER_STEP_KEYS, values, strict=True)}
