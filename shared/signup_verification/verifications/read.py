"""Reading one verification for the site that created it (GET /<verification_id> on create_verification).

What the site may learn: the verification's state, its timestamps, which secret verified it
(`verified_channel`, `verified_via`: `channel` is the primary channel requested, not what was
proved), every proof (`proofs`: each secret proves its own destination, proofs.py), where its person
can type the code (`code_entry_url`, while that page asks for a code: entry.py), and its message
deliveries, one per step in order (step, channel, role, after_seconds, status, attempts, the last attempt's outcome, when accepted, delivered or
failed, and why a failed one failed). The destination only masked; never a token, a code, a nonce or
a digest; webhook events (role 'event') are not deliveries.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from ..platform.catalogue import catalogue
from ..platform.database import Database
from ..platform.errors import ConfigError
from ..platform.redaction import mask_destination
from .proofs import Proof, proofs
from .step_state import PENDING, entry_channel, result_of
from .tokens import Keyring, code_entry_url

_SQL = catalogue("verifications")

_READ = _SQL["read"]


@dataclass(frozen=True)
class Delivery:
    step: int  # 1, 2, 3: the verification's steps in order (the primary is step 1)
    channel: str
    role: str  # primary (step 1) | fallback (every later step)
    after_seconds: int  # when the step is due after create unless proved first (0: at once)
    destination: str  # masked, like the verification's
    status: str  # the intent's status, or delivered / undeliverable (what the provider reported)
    attempts: int
    last_outcome: str | None  # the newest attempt row's outcome; None before the first attempt
    accepted_at: str | None  # RFC 3339 UTC, when the channel's provider accepted it
    delivered_at: str | None  # when the provider reported it delivered
    failed_at: str | None  # when it failed for good
    reason: dict[str, str | None] | None  # {category, code, provider, fault} of a failed one


@dataclass(frozen=True)
class VerificationView:
    verification_id: str
    account_id: str
    channel: str
    destination: str  # masked ('a***@example.com', '+1******0100'), '[redacted]' after retention
    status: str
    created_at: str
    expires_at: str
    verified_at: str | None
    verified_channel: str | None  # whose secret verified it (the first proof): its step's channel
    verified_via: str | None  # 'link' | 'code'
    proofs: tuple[Proof, ...]  # every proof, first first
    code_entry_url: str | None  # the hosted code-entry page, while it asks for a code
    return_url: str | None
    deliveries: tuple[Delivery, ...]

    def as_json(self) -> dict[str, Any]:
        return {
            "verification_id": self.verification_id,
            "account_id": self.account_id,
            "channel": self.channel,
            "destination": self.destination,
            "status": self.status,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "verified_at": self.verified_at,
            "verified_channel": self.verified_channel,
            "verified_via": self.verified_via,
            "proofs": [p.as_json() for p in self.proofs],
            "code_entry_url": self.code_entry_url,
            "return_url": self.return_url,
            "deliveries": [vars(d) for d in self.deliveries],
        }


def read(db: Database, keyring: Keyring, link_base: str, verification_id: uuid.UUID) -> VerificationView | None:
    """`link_base`: the confirm target's public URL (VERIFY_LINK_BASE), the code-entry page's base."""
    row = db.one(_READ, id=verification_id)
    if row is None:
        return None
    by_channel = {d["channel"]: d["destination"] for d in row["deliveries"]}  # a step's channel names it
    row["fallback_destination"] = by_channel.get(row["fallback_channel"])
    row["step3_destination"] = by_channel.get(row["step3_channel"])
    deliveries = tuple(
        Delivery(
            step,
            d["channel"],
            d["role"],
            d["after_seconds"],
            mask_destination(d["channel"], d["destination"]),
            d["status"],
            d["attempts"],
            d["last_outcome"],
            d["accepted_at"],
            d["delivered_at"],
            d["failed_at"],
            d["reason"],
        )
        for step, d in enumerate(row["deliveries"], start=1)
    )
    return VerificationView(
        verification_id=str(row["id"]),
        account_id=row["account_id"],
        channel=row["channel"],
        destination=mask_destination(row["channel"], row["destination"]),
        status=row["status"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        verified_at=row["verified_at"],
        verified_channel=row["verified_channel"],
        verified_via=row["verified_via"],
        proofs=proofs(row),
        code_entry_url=_code_entry_url(keyring, link_base, row),
        return_url=row["return_url"],
        deliveries=deliveries,
    )


def _code_entry_url(keyring: Keyring, link_base: str, row: dict[str, Any]) -> str | None:
    """The page's URL while it asks for a code (entry.py): a code step can still prove, sent or not
    sent yet while the verification waits for it. Not once a code proved, nor after a link proof that
    left no code step sent, nor once every code step ended unsent, nor when the verification ended.
    Under the key the verification was made with (the create answer's), or the ring's first when that
    key was retired (every key opens it)."""
    page = {**row, "status": row["stored_status"], "expires_at": row["expires_ts"]}
    channel = entry_channel(page)
    if channel is None or result_of(page, channel) != PENDING:
        return None
    try:
        key = keyring.get(row["key_id"])
    except ConfigError:
        key = keyring.primary
    return code_entry_url(link_base, key, row["id"])
