"""Proofs: which secret of a verification proved which destination, and when.

A verification has one secret per message channel, the email's link and the SMS code, and each proves
its own destination, once (docs/state-model.md, "Proofs"). The first proof made the verification
verified: `verified_at`, `verified_channel`, `verified_via`. A verification with a fallback may have a
second: the other channel's secret, used before expiry, at `second_proof_at`. The read API,
the confirm answer and `verifyctl inspect` list them as `{channel, via, destination (masked), at}`.

The functions read a verification row with `channel`, `destination`, `fallback_channel`,
`fallback_destination`, the three `verified_*` columns and `second_proof_at`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..platform.redaction import mask_destination
from ..platform.timestamps import rfc3339

VIA = {"email": "link", "sms": "code"}  # each channel's secret: the email carries the link, the SMS the code


@dataclass(frozen=True)
class Proof:
    channel: str  # email | sms: the destination proved is this channel's
    via: str  # link | code
    destination: str  # masked ('a***@example.com', '+1******0100'); '[redacted]' after retention
    at: str  # RFC 3339, UTC

    def as_json(self) -> dict[str, str]:
        return {"channel": self.channel, "via": self.via, "destination": self.destination, "at": self.at}


def destination_of(row: Mapping[str, Any], channel: str) -> str | None:
    """The unmasked destination of one message channel of the verification (the fallback's is its own)."""
    return row["destination"] if channel == row["channel"] else row.get("fallback_destination")


def proved_at(row: Mapping[str, Any], channel: str) -> Any:
    """When this channel's secret proved its destination, or None."""
    first = row.get("verified_channel")
    if first is None:  # not verified (or verified, with a fallback, before proofs were recorded: unknown)
        return None
    if channel == first:
        return row["verified_at"]
    return row.get("second_proof_at") if channel in (row["channel"], row.get("fallback_channel")) else None


def proofs(row: Mapping[str, Any]) -> tuple[Proof, ...]:
    """Every proof of the verification, in the order they were made."""
    first = row.get("verified_channel")
    if first is None:
        return ()
    order = [first, *(c for c in (row["channel"], row.get("fallback_channel")) if c and c != first)]
    return tuple(
        Proof(channel, VIA[channel], mask_destination(channel, destination_of(row, channel)), _text(at))
        for channel in order
        if (at := proved_at(row, channel)) is not None
    )


def _text(at: datetime | str) -> str:
    return at if isinstance(at, str) else rfc3339(at)
