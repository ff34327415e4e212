"""What a verification's state means to each of its steps' secrets, and which code step the hosted
code-entry page speaks for: pure functions of a state row (verifications/queries/confirm.sql:confirm_state,
or the read statement's same columns), no digest needed. The confirmations (confirm.py), the page
(entry.py) and the read API's `code_entry_url` (read.py) share them; this module imports neither
hashing nor the confirm statements, so the create target can read a verification without them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from ..outbox.states import VerificationStatus
from ..platform.channels import code_channels, is_code_channel
from .proofs import ended_unsent, proofs, proved_at, was_sent


class Result(StrEnum):
    """What a look-up or a confirmation found. Outcomes only: api/confirm.py renders each one."""

    PENDING = "pending"  # only from a look-up: this secret can still prove its destination
    VERIFIED = "verified"  # this request's secret proved its destination now
    ALREADY_VERIFIED = "already_verified"  # this same secret proved it before: the person is done
    EXPIRED = "expired"
    SUPERSEDED = "superseded"  # a newer message replaced this one
    LOCKED = "locked"  # too many wrong codes
    WRONG_CODE = "wrong_code"  # counted; `remaining_attempts` tries remain
    FINISHED = "finished"  # a code that can no longer prove, whichever way: says nothing more
    INVALID = "invalid"  # unknown or malformed (not found): says nothing more


PENDING, VERIFIED, ALREADY_VERIFIED, EXPIRED = Result.PENDING, Result.VERIFIED, Result.ALREADY_VERIFIED, Result.EXPIRED
SUPERSEDED, LOCKED, WRONG_CODE, INVALID = Result.SUPERSEDED, Result.LOCKED, Result.WRONG_CODE, Result.INVALID
FINISHED = Result.FINISHED


def result_of(row: dict[str, Any], presented: str) -> Result:
    """What the verification's state means to one step's secret (`presented`: its channel)."""
    status = row["status"]
    unexpired = row["expires_at"] > row["db_now"]
    tries_spent = is_code_channel(presented) and row["confirm_failures"] >= row["max_confirm_failures"]
    if status == VerificationStatus.VERIFIED:
        if proved_at(row, presented) is not None:
            return ALREADY_VERIFIED
        if row["verified_channel"] is None or not unexpired:  # expired, or verified before proofs were kept
            return EXPIRED
        if not was_sent(row, presented):  # never sent, and a verified verification sends nothing more
            return EXPIRED
        return LOCKED if tries_spent else PENDING  # this one can still prove its destination
    if status == VerificationStatus.PENDING and unexpired:
        # a step that ended unsent (refused, suppressed, expired before any send) never will be sent
        return EXPIRED if ended_unsent(row, presented) else PENDING
    if status in (VerificationStatus.PENDING, VerificationStatus.EXPIRED):
        return EXPIRED  # expires_at is the truth; the status catches up lazily
    return SUPERSEDED if status == VerificationStatus.SUPERSEDED else LOCKED


def waiting_channel(row: dict[str, Any], channels: tuple[str, ...]) -> str | None:
    """Of these code steps, the one a code is asked for: the latest sent that can still prove (the
    newest message the person holds), else the first that can (not sent yet); None when none can."""
    waiting = [channel for channel in channels if result_of(row, channel) == PENDING]
    sent = [channel for channel in waiting if was_sent(row, channel)]
    chosen = sent or waiting[:1]
    return chosen[-1] if chosen else None


def entry_channel(row: dict[str, Any]) -> str | None:
    """The code step the code-entry page speaks for, None without one. The page is one person's way to
    prove a number: once a code of this verification proved, it says so (the first code proof's step),
    whatever other step could still prove. Else it asks for a code while any code step can prove
    (pending here: its message may have reached the person, or it may still be sent: not sent yet
    while the verification waits for it, its intent not ended), naming the latest such step sent
    (the message the person holds newest), or the first when none was sent yet. Else how it ended:
    locked when a sent step's tries are spent, otherwise as the first step sees it (expired when
    every code step ended unsent).
    `row` is a confirm state (verifications/queries/confirm.sql:confirm_state) or a read row with the same
    columns; no digest is needed."""
    channels = code_channels(row["channel"], row.get("fallback_channel"), row.get("step3_channel"))
    if not channels:
        return None
    proved = next((p.channel for p in proofs(row) if p.via == "code"), None)
    if proved is not None:
        return proved
    waiting = waiting_channel(row, channels)
    if waiting is not None:
        return waiting
    return next((channel for channel in channels if result_of(row, channel) == LOCKED), channels[0])
