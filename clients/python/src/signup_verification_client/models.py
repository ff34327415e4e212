"""What the service answers, as typed values (docs/openapi.yaml's schemas), and the fallback or steps a create asks for.

Timestamps are kept as the service sends them: RFC 3339 strings, UTC, `Z`, milliseconds. Fields a
service older than this client does not send read as None.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

# email carries a link; sms, whatsapp and voice (a call) each carry a code of their own to an E.164 number
Channel = Literal["email", "sms", "whatsapp", "voice"]


@dataclass(frozen=True)
class Fallback:
    """Another message channel, sent `after_seconds` after create unless the verification was
    confirmed first; `after_seconds=0` sends both at once (the `both` policy). The destination is
    validated like a primary one (its refusals point at `#/fallback/destination`)."""

    channel: Channel
    destination: str
    after_seconds: int

    def as_json(self) -> dict[str, Any]:
        return {"channel": self.channel, "destination": self.destination, "after_seconds": self.after_seconds}


@dataclass(frozen=True)
class Step:
    """One step of an ordered verification (`Client.create_steps`): its channel and destination, sent
    `after_seconds` after create unless the verification was confirmed first, or at once when the
    step before failed for good. The first step's after_seconds is 0; each step is on its own channel."""

    channel: Channel
    destination: str
    after_seconds: int = 0

    def as_json(self) -> dict[str, Any]:
        return {"channel": self.channel, "destination": self.destination, "after_seconds": self.after_seconds}


@dataclass(frozen=True)
class FallbackPolicy:
    """The policy a create answer confirms (never the fallback's destination)."""

    channel: str
    after_seconds: int
    policy: str  # fallback | both


@dataclass(frozen=True)
class StepPolicy:
    """One step as a create answer confirms it: its channel and when it is due (never its destination)."""

    channel: str
    after_seconds: int


@dataclass(frozen=True)
class Verification:
    """A create's answer, with the Idempotency-Key it was sent under (keep it to retry later).
    `code_entry_url`: the service's page where the person types the code, when a code channel (sms,
    whatsapp, voice) is among the channels (send them there, or confirm the code from your own form with `Client.confirm_code`)."""

    verification_id: str
    account_id: str
    channel: str
    status: str
    created_at: str
    expires_at: str
    idempotency_key: str
    replayed: bool = False
    fallback: FallbackPolicy | None = None
    code_entry_url: str | None = None
    steps: tuple[StepPolicy, ...] = ()  # every step in order, when the verification has a third


@dataclass(frozen=True)
class Proof:
    """What one step's secret proved: the email's link the address (`channel` email, `via` link), a
    code its number (`sms`, `whatsapp` or `voice`: the channel that delivered it, `code`). Each secret
    proves its own destination, once."""

    channel: str
    via: str
    destination: str  # masked
    at: str


@dataclass(frozen=True)
class DeliveryReason:
    """Why a delivery failed for good: a documented `category` (bounced, invalid_destination, blocked,
    unreachable, ...: docs/webhooks.md), the provider's own `code` (never free text), the `provider`,
    and whose `fault` it was (recipient | sender_or_account | transient_or_unknown)."""

    category: str
    code: str | None
    provider: str | None
    fault: str


@dataclass(frozen=True)
class Delivery:
    """One step's delivery (`step` 1 the primary), in order."""

    channel: str
    role: str  # primary (step 1) | fallback (every later step)
    destination: str  # masked
    status: (
        str  # ready, claimed, attempting, retryable, ambiguous, accepted, delivered, failed, undeliverable, suppressed
    )
    attempts: int
    last_outcome: str | None
    accepted_at: str | None
    delivered_at: str | None = None
    failed_at: str | None = None
    reason: DeliveryReason | None = None
    step: int | None = None  # its place in the order (1: the primary); None from an older service
    after_seconds: int | None = None  # when it was due after create unless proved first (0: at once)


@dataclass(frozen=True)
class VerificationState:
    """GET /<verification_id>: the state as the service sees it now.

    `channel` is the primary channel requested; `proofs` lists what the person proved (the address by
    the email's link, the number by a code), first first; `verified_channel` (email | sms | whatsapp |
    voice) and
    `verified_via` (link | code) name the first, which made it verified."""

    verification_id: str
    account_id: str
    channel: str
    destination: str  # masked
    status: str  # pending | verified | expired | superseded | locked
    created_at: str
    expires_at: str
    verified_at: str | None
    return_url: str | None
    deliveries: tuple[Delivery, ...]
    verified_channel: str | None = None
    verified_via: str | None = None
    proofs: tuple[Proof, ...] = ()
    code_entry_url: str | None = None  # the hosted code-entry page, when a code channel is among the channels

    @property
    def is_verified(self) -> bool:
        return self.status == "verified"

    def proved(self, channel: str) -> bool:
        """Whether the person proved this channel's destination ("email": the address, a code channel: the number)."""
        return any(p.channel == channel for p in self.proofs)


@dataclass(frozen=True)
class Confirmation:
    """A confirmed code: the verification as the read API names it, and what this code proved
    (`proof`; `already_verified`: it had proved it before, nothing new was recorded)."""

    verification_id: str
    account_id: str
    verified_at: str
    already_verified: bool
    channel: str | None = None  # the primary channel requested, as in VerificationState
    verified_channel: str | None = None  # the first proof's channel, which made it verified
    verified_via: str | None = None
    proof: Proof | None = None  # what this request's code proved: its channel (sms, whatsapp, voice), via "code"
    proofs: tuple[Proof, ...] = ()


# -- parsing the answers -----------------------------------------------------------------------------
def proof(item: Mapping[str, Any]) -> Proof:
    return Proof(item["channel"], item["via"], item["destination"], item["at"])


def verification(answer: Mapping[str, Any], key: str, replayed: bool) -> Verification:
    fallback = answer.get("fallback")
    return Verification(
        verification_id=answer["verification_id"],
        account_id=answer["account_id"],
        channel=answer["channel"],
        status=answer["status"],
        created_at=answer["created_at"],
        expires_at=answer["expires_at"],
        idempotency_key=key,
        replayed=replayed,
        fallback=FallbackPolicy(fallback["channel"], int(fallback["after_seconds"]), fallback["policy"])
        if isinstance(fallback, Mapping)
        else None,
        code_entry_url=answer.get("code_entry_url"),
        steps=tuple(StepPolicy(s["channel"], int(s["after_seconds"])) for s in answer.get("steps") or ()),
    )


def delivery(item: Mapping[str, Any]) -> Delivery:
    reason = item.get("reason")
    return Delivery(
        channel=item["channel"],
        role=item["role"],
        destination=item["destination"],
        status=item["status"],
        attempts=int(item["attempts"]),
        last_outcome=item.get("last_outcome"),
        accepted_at=item.get("accepted_at"),
        delivered_at=item.get("delivered_at"),
        failed_at=item.get("failed_at"),
        reason=DeliveryReason(reason["category"], reason.get("code"), reason.get("provider"), reason["fault"])
        if isinstance(reason, Mapping)
        else None,
        step=item.get("step"),
        after_seconds=item.get("after_seconds"),
    )


def verification_state(answer: Mapping[str, Any]) -> VerificationState:
    return VerificationState(
        verification_id=answer["verification_id"],
        account_id=answer["account_id"],
        channel=answer["channel"],
        destination=answer["destination"],
        status=answer["status"],
        created_at=answer["created_at"],
        expires_at=answer["expires_at"],
        verified_at=answer.get("verified_at"),
        return_url=answer.get("return_url"),
        deliveries=tuple(delivery(d) for d in answer["deliveries"]),
        verified_channel=answer.get("verified_channel"),
        verified_via=answer.get("verified_via"),
        proofs=tuple(proof(p) for p in answer.get("proofs") or ()),
        code_entry_url=answer.get("code_entry_url"),
    )


def confirmation(answer: Mapping[str, Any]) -> Confirmation:
    shown = answer.get("proof")
    return Confirmation(
        verification_id=answer["verification_id"],
        account_id=answer["account_id"],
        verified_at=answer["verified_at"],
        already_verified=bool(answer["already_verified"]),
        channel=answer.get("channel"),
        verified_channel=answer.get("verified_channel"),
        verified_via=answer.get("verified_via"),
        proof=proof(shown) if isinstance(shown, Mapping) else None,
        proofs=tuple(proof(p) for p in answer.get("proofs") or ()),
    )
