"""Proofs: which secret of a verification proved which destination, and when.

A verification has one secret per step, each step on a channel of its own (the email's is a link,
every other channel's a code), and each proves its step's destination, once (docs/state-model.md,
"Proofs"). The first proof made the verification verified: `verified_at`, `verified_channel`,
`verified_via`. A verification of two or three steps may have later ones: another step's secret, used
before expiry, at `second_proof_at` (its channel `second_proof_channel`; NULL on rows from before three
steps, where it is the other of the two), then `third_proof_at` (the one step left). The read API,
the confirm answer and `verifyctl inspect` list them as `{channel, via, destination (masked), at}`.

The functions read a verification row with `channel`, `destination`, `fallback_channel`,
`fallback_destination`, `step3_channel`, `step3_destination`, the three `verified_*` columns and the
later proofs' columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..platform.channels import EMAIL
from ..platform.redaction import mask_destination
from ..platform.timestamps import rfc3339


@dataclass(frozen=True)
class Proof:
    channel: str  # the step's channel: the destination proved is this step's
    via: str  # link (the email's) | code (every other channel's)
    destination: str  # masked ('a***@example.com', '+1******0100'); '[redacted]' after retention
    at: str  # RFC 3339, UTC

    def as_json(self) -> dict[str, str]:
        return {"channel": self.channel, "via": self.via, "destination": self.destination, "at": self.at}


def via(channel: str) -> str:
    """What a step's secret is: the email carries the link, every other channel a code."""
    return "link" if channel == EMAIL else "code"


def step_channels(row: Mapping[str, Any]) -> tuple[str, ...]:
    """The verification's steps' channels, in step order."""
    steps = (row["channel"], row.get("fallback_channel"), row.get("step3_channel"))
    return tuple(c for c in steps if c)


def destination_of(row: Mapping[str, Any], channel: str) -> str | None:
    """The unmasked destination of one step of the verification (a later step's is its own)."""
    if channel == row["channel"]:
        return row["destination"]
    if channel == row.get("fallback_channel"):
        return row.get("fallback_destination")
    return row.get("step3_destination") if channel == row.get("step3_channel") else None


def proved_at(row: Mapping[str, Any], channel: str) -> Any:
    """When this step's secret proved its destination, or None."""
    first = row.get("verified_channel")
    if first is None:  # not verified (or verified, with a fallback, before proofs were recorded: unknown)
        return None
    if channel == first:
        return row["verified_at"]
    if channel not in step_channels(row) or row.get("second_proof_at") is None:
        return None
    second = row.get("second_proof_channel")
    if second is None:  # a second proof from before three steps: the other of the two steps
        return row["second_proof_at"] if channel in (row["channel"], row.get("fallback_channel")) else None
    return row["second_proof_at"] if channel == second else row.get("third_proof_at")


def proofs(row: Mapping[str, Any]) -> tuple[Proof, ...]:
    """Every proof of the verification, in the order they were made."""
    first = row.get("verified_channel")
    if first is None:
        return ()
    made = [(at, channel) for channel in step_channels(row) if (at := proved_at(row, channel)) is not None]
    made.sort(key=lambda proof: (proof[1] != first, _text(proof[0])))  # the first proof first, then by time
    return tuple(
        Proof(channel, via(channel), mask_destination(channel, destination_of(row, channel)), _text(at))
        for at, channel in made
    )


def _text(at: datetime | str) -> str:
    return at if isinstance(at, str) else rfc3339(at)
