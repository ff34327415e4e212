"""Proofs: which secret of a verification proved which destination, and when.

A verification has one secret per step, each step on a channel of its own (the email's is a link,
every other channel's a code), and each proves its step's destination, once (docs/state-model.md,
"Proofs"). The first proof made the verification verified: `verified_at`, `verified_channel`,
`verified_via`. A verification of two or three steps may have later ones: another step's secret, used
before expiry, at `second_proof_at` (its channel `second_proof_channel`; NULL on rows from before three
steps, where it is the other of the two), then `third_proof_at` (the one step left). The read API,
the confirm answer and `verifyctl inspect` list them as `{channel, via, destination (masked), at}`.

A code step's secret may prove only while its message may have reached the person (`was_sent`,
verifications/confirm.py says which sends count): a step not yet due, one a proof cancelled, or one
whose every send was proven never to have reached the provider was given to nobody. The email's link
is only ever known from its message.

The functions read a verification row with `channel`, `destination`, `fallback_channel`,
`fallback_destination`, `step3_channel`, `step3_destination`, the three `verified_*` columns and the
later proofs' columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..platform.channels import EMAIL, code_channels
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


# -- the secrets a presented one is compared with (verifications/confirm.py) ----------------------
def step_secrets(row: dict[str, Any]) -> list[tuple[str, bytes]]:
    """Each step's channel and its secret's digest, in step order: step 1 the verification's channel
    and token_digest, step 2 the fallback's, step 3 step3_*. A step's channel names it: channels differ."""
    steps = (
        (row["channel"], row["token_digest"]),
        (row.get("fallback_channel"), row.get("fallback_digest")),
        (row.get("step3_channel"), row.get("step3_digest")),
    )
    return [(channel, bytes(digest)) for channel, digest in steps if channel is not None and digest is not None]


def presented_by(row: dict[str, Any], channel: str) -> dict[str, Any] | None:
    """The row as seen by one step's secret (`presented`: the step's channel, `presented_digest`: its
    digest), or None when the verification has no step on that channel. `channel` stays step 1's."""
    digest = next((d for c, d in step_secrets(row) if c == channel), None)
    if digest is None:
        return None
    return {**row, "presented": channel, "presented_digest": digest}


def code_rows(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The row as seen by each code channel's secret (presented_by), the primary's first: the code
    channels of this verification, whose codes a typed code is compared with."""
    return [
        seen
        for channel in code_channels(row["channel"], row.get("fallback_channel"), row.get("step3_channel"))
        if (seen := presented_by(row, channel))
    ]


def was_sent(row: dict[str, Any], channel: str) -> bool:
    """Whether this step's secret may be known, so may prove: its message may have reached the person
    (the confirm state's `sent_channels`), or it is the email's link."""
    return channel == EMAIL or channel in row["sent_channels"]


def ended_unsent(row: dict[str, Any], channel: str) -> bool:
    """Whether this code step ended without its message ever reaching the provider (the confirm
    state's `ended_unsent_channels`): nobody holds its code, and nobody ever will. Never the email's link."""
    return channel != EMAIL and channel in row["ended_unsent_channels"]
