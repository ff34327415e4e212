"""Confirming a verification: the email link's token or a step's code, each proving its own destination once.

Every secret proves its own step's destination (proofs.py): the link the address, a code its number.
A verification has up to three steps, each on a channel of its own with its own secret; a code is
matched against every code step's digest, and the one it matches names the step (`presented`). The
first proof makes a pending verification verified; another step's secret, used later but before
expiry, records its proof too. Looking a link up never changes anything (mail scanners and
link previews fetch links); only `confirm_link` / `confirm_code` consume, with one UPDATE that requires
the matched digest, an unexpired verification and a secret that has not proved before
(verifications/queries/confirm.sql:confirm_link, verifications/queries/confirm.sql:confirm_consume), so two concurrent confirmations record one proof.

What a secret hears is about that secret (`Outcome.presented`): ALREADY_VERIFIED only when this same
secret proved its destination before; a verification another secret verified leaves this one
PENDING (it can still prove, if its step was sent) until it expires. A code that can no longer
prove (the verification expired, superseded or locked, or its number proved, or its tries spent) is
answered FINISHED whatever the reason (the read API is where the site learns which), and a wrong one
is counted there too, against the verification's and the destination's budgets: guessing after the
end costs what guessing before it does. Only the right code of a number it proved before hears ALREADY_VERIFIED.

Digests are keyed HMACs (tokens.py). A link names its verification (the id, then the token), whose
row is read by primary key; the token's digest under the key that row names must be the row's
(compared in SQL to consume, in constant time to show the page). A code is compared under
every key, without stopping at the first match. The hosted code-entry page names its verification by a
handle only the keyring makes (tokens.py), and confirms through `confirm_code` (entry.py).

A step's code proves only while its message may have reached the person (`was_sent`): before its
send began, nobody was given it, so a code that matches only an unsent step's secret is a wrong code,
counted and answered as any other (every step's digest is still compared: neither the time nor the
answer tells which steps were sent). Else each try would guess every step's code at once, and a step
not due yet, one a proof cancelled or one the provider refused would prove a destination nobody
showed they control. "May have reached" (the outbox's view step_sends) starts at the earliest moment
the provider may have the code, when the attempt's send started (the intent's `sending_at`, which the
outbox sets before the network call), and holds unless that send was proven never to have reached the
provider: released before its send started, settled `retryable` (certainly not sent) or `failed` at
submission (refused: the provider never took it), or ambiguous and then looked up absent at the
provider. A send the provider took (accepted, then reported delivered or undeliverable) or may have
taken (ambiguous, not found absent) counts: a report of non-delivery can be wrong. A later attempt of
the step whose send starts counts anew. The state statement reads it (`sent_channels`): no round trip
of its own. A verified verification sends nothing more (its proof suppressed the unsent steps), and a
step whose intent ended unsent (`ended_unsent_channels`: refused, suppressed, expired) never will be
sent: such a step's code is dead, a look-up answers EXPIRED, a code FINISHED. The email's link is only
ever known from its message: it may always prove.
"""

from __future__ import annotations

import hmac
import logging
import re
import unicodedata
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..outbox.states import VerificationStatus
from ..platform.catalogue import catalogue
from ..platform.channels import CODE_CHANNELS, is_code_channel
from ..platform.database import Database
from ..platform.errors import ConfigError
from ..platform.redaction import mask_destination
from .proofs import Proof, code_rows, destination_of, presented_by, proofs, was_sent
from .step_state import (
    ALREADY_VERIFIED,
    FINISHED,
    INVALID,
    LOCKED,
    PENDING,
    VERIFIED,
    WRONG_CODE,
    Result,
    result_of,
    waiting_channel,
)
from .step_state import EXPIRED as EXPIRED  # every outcome is confirm's vocabulary too
from .step_state import SUPERSEDED as SUPERSEDED
from .tokens import Keyring, split_link

_SQL = catalogue("verifications")

_log = logging.getLogger("signup_verification.verifications.confirm")

_STATE = _SQL["confirm_state"]
_CONSUME = _SQL["confirm_consume"]
_CONFIRM_LINK = _SQL["confirm_link"]
_WRONG_CODE = _SQL["confirm_wrong_code"]
_DESTINATION_FAILURES = _SQL["confirm_destination_failures"]
_LOCK_DESTINATION = _SQL["confirm_lock_destination"]

# A link carries the verification id and 32 bytes of HMAC, unpadded base64url (tokens.TokenKey.link).
_TOKEN_SHAPE = re.compile(r"^[A-Za-z0-9_-]{65}$")
_CODE_SEPARATORS = re.compile(r"[\s-]")


@dataclass(frozen=True)
class Outcome:
    result: Result
    verification_id: uuid.UUID | None = None
    account_id: str | None = None
    channel: str | None = None  # the primary channel requested, as in the read API
    presented: str | None = None  # whose secret this request presented: its step's channel ('email': the link)
    verified_at: datetime | None = None
    expires_at: datetime | None = None
    destination_hint: str | None = None  # masked: the destination this secret proves, for the page
    remaining_attempts: int | None = None
    locale: str | None = None  # the verification's (its message used it): its page follows
    return_url: str | None = None  # the site's page the Continue / back links go to (stored, checked at create)
    verified_channel: str | None = None  # the first proof, which made it verified: its step's channel
    verified_via: str | None = None  # 'link' | 'code'
    proofs: tuple[Proof, ...] = ()  # every proof so far, first first

    @property
    def is_verified(self) -> bool:
        return self.result in (VERIFIED, ALREADY_VERIFIED)

    @property
    def proof(self) -> Proof | None:
        """What this request's secret proved (now, or before)."""
        return next((p for p in self.proofs if p.channel == self.presented), None)


class MalformedCode(ValueError):
    """The code is not N digits: a typing slip that is refused without counting as a try."""


def normalise_code(code: str, digits: int) -> str:
    """'123 456' and '123-456' are what people type; anything else but exactly N digits is refused.
    NFKC first: Japanese keyboards type full-width digits and spaces ('１２３　４５６')."""
    if len(code) > 64:
        raise MalformedCode(f"the code is {digits} digits")
    cleaned = _CODE_SEPARATORS.sub("", unicodedata.normalize("NFKC", code))
    if len(cleaned) != digits or not cleaned.isascii() or not cleaned.isdigit():
        raise MalformedCode(f"the code is {digits} digits")
    return cleaned


# -- email links ------------------------------------------------------------------------------
def _link_target(link: str | None) -> tuple[uuid.UUID, str] | None:
    """The verification id a link names and its token, or None when it cannot be one of ours."""
    if not link or not _TOKEN_SHAPE.match(link):
        return None  # not one of ours: no query, no timing difference worth measuring
    verification_id, token = split_link(link)
    if verification_id is None or not token:
        return None
    return verification_id, token


def preview_link(db: Database, keyring: Keyring, link: str | None) -> Outcome:
    """What the link's page shows (GET): never writes."""
    target = _link_target(link)
    if target is None:
        return Outcome(INVALID)
    verification_id, token = target
    state = db.one(_STATE, id=verification_id)
    row = presented_by(state, "email") if state is not None else None  # the email may be any step
    if row is None:
        return Outcome(INVALID)
    try:
        key = keyring.get(row["key_id"])
    except ConfigError:
        _log.error("verification %s names token key %r, which is no longer configured", row["id"], row["key_id"])
        return Outcome(INVALID)
    if not hmac.compare_digest(key.link_digest(token), bytes(row["presented_digest"])):
        return Outcome(INVALID)
    return from_state(row)


def confirm_link(db: Database, keyring: Keyring, link: str | None) -> Outcome:
    """Find and consume in one statement (the confirm_link statement): no look-up round trip first."""
    found = None
    target = _link_target(link)
    if target is not None:
        verification_id, token = target
        keys = keyring.keys
        found = db.one(
            _CONFIRM_LINK,
            id=verification_id,
            key_ids=[k.key_id for k in keys],
            digests=[k.link_digest(token) for k in keys],
        )
    if found is None:
        _log.info("confirmation refused: unknown link", extra={"json_fields": {"event": "confirm", "result": INVALID}})
        return Outcome(INVALID)
    if found["consumed"]:
        return _proved(_seen(_consumed(found, found, "new_"), "email"))
    row = _seen(found, "email")  # the statement found the row by its email digest
    known = from_state(row)
    if known.result == PENDING:  # it could prove in this statement's snapshot: a concurrent one won
        return _restate(db, row)
    return logged(known)


# -- SMS codes --------------------------------------------------------------------------------
def confirm_code(
    db: Database, keyring: Keyring, verification_id: uuid.UUID, code: str, failures_per_day: int = 0
) -> Outcome:
    """`code` must already be normalised (normalise_code). A wrong code counts as one try.
    `failures_per_day` (> 0): once the destination had that many wrong codes in a day, across all its
    verifications, every code is answered locked, the right one too (else the answer is an oracle)."""
    state = db.one(_STATE, id=verification_id)
    rows = code_rows(state) if state is not None else []  # each code channel's secret (primary or fallback)
    if not rows:
        _log.info(
            "confirmation refused: unknown verification", extra={"json_fields": {"event": "confirm", "result": INVALID}}
        )
        return Outcome(INVALID)
    # a wrong code is told as the code step's a code is asked for (waiting_channel), else the first's
    waiting = waiting_channel(state, tuple(r["presented"] for r in rows)) if state is not None else None
    row, matched = next((r for r in rows if r["presented"] == waiting), rows[0]), None
    digests = [key.code_digest(verification_id, code) for key in keyring.keys]
    for seen in rows:  # every key and channel, no early exit: the time does not depend on which matched
        sent = was_sent(seen, seen["presented"])
        for digest in digests:
            # an unsent step's code matches nothing: every digest is compared all the same
            if hmac.compare_digest(digest, bytes(seen["presented_digest"])) and sent:
                row, matched = seen, digest
    known = from_state(row)
    if known.result != PENDING:  # this code can no longer prove: only its own earlier proof is told
        if matched is not None and known.result == ALREADY_VERIFIED:
            return logged(known)
        if matched is None:
            db.one(_WRONG_CODE, id=verification_id, code_channels=list(CODE_CHANNELS))
        return logged(Outcome(FINISHED, presented=row["presented"], locale=row["locale"]))
    if (
        failures_per_day > 0
        and db.single(_DESTINATION_FAILURES, id=verification_id, code_channels=list(CODE_CHANNELS))["failures"]
        >= failures_per_day
    ):
        _log.warning(
            "confirmation refused: destination over its daily wrong-code budget",
            extra={"json_fields": {"event": "confirm", "result": LOCKED, "reason": "destination_failures"}},
        )
        # verified by the link: it stays verified, the code proves nothing
        if row["status"] != VerificationStatus.PENDING:
            return logged(Outcome(FINISHED, presented=row["presented"], locale=row["locale"]))
        db.one(_LOCK_DESTINATION, id=verification_id)  # locked for real: the site reads and hears `locked`
        return _attempted(LOCKED, row)
    if matched is not None:
        return _consume(db, row, matched)
    failed = db.one(_WRONG_CODE, id=verification_id, code_channels=list(CODE_CHANNELS))
    if failed is None:  # purged between the two statements
        return logged(Outcome(INVALID))
    if failed["status"] not in (row["status"], VerificationStatus.LOCKED):  # it ended between the two statements
        return logged(Outcome(FINISHED, presented=row["presented"], locale=row["locale"]))
    remaining = max(failed["max_confirm_failures"] - failed["confirm_failures"], 0)
    return _attempted(LOCKED if failed["status"] == VerificationStatus.LOCKED else WRONG_CODE, row, remaining)


# -- shared -----------------------------------------------------------------------------------
def _consume(db: Database, row: dict[str, Any], digest: bytes) -> Outcome:
    consumed = db.one(_CONSUME, id=row["id"], digest=digest, channel=row["presented"])
    if consumed is not None:
        return _proved(_seen(_consumed(row, consumed), row["presented"]))
    restated = _restate(db, row)
    if restated.result in (ALREADY_VERIFIED, PENDING):
        return restated
    return Outcome(FINISHED, presented=row["presented"], locale=row["locale"])


def _consumed(row: dict[str, Any], after: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """The row as the consuming statement left it: its proof columns from `after` (a code's RETURNING,
    or the link statement's `new_*` columns)."""
    return {
        **row,
        "status": VerificationStatus.VERIFIED,
        **{column: after[prefix + column] for column in ("verified_at", "verified_channel", "verified_via")},
        **{column: after[prefix + column] for column in ("second_proof_at", "second_proof_channel", "third_proof_at")},
    }


def _proved(row: dict[str, Any]) -> Outcome:
    return logged(_described(VERIFIED, row))


def _attempted(result: Result, row: dict[str, Any], remaining: int | None = None) -> Outcome:
    """A code tried while it could still prove: wrong (counted), or the verification locked."""
    return logged(_described(result, row, remaining_attempts=remaining))


def _restate(db: Database, row: dict[str, Any]) -> Outcome:
    # Lost the race or the state changed since the look-up: read it again in a fresh statement.
    latest = db.one(_STATE, id=row["id"])
    return logged(from_state((presented_by(latest, row["presented"]) if latest else None) or row))


def _seen(row: dict[str, Any], channel: str) -> dict[str, Any]:
    """presented_by for a row the statement that returned it found by that channel's digest."""
    seen = presented_by(row, channel)
    if seen is None:
        raise ValueError(f"verification {row['id']} has no {channel} channel")
    return seen


def from_state(row: dict[str, Any]) -> Outcome:
    """What the verification's state means to the secret `row` is seen by (presented_by), without a write."""
    presented = row["presented"]
    remaining = max(row["max_confirm_failures"] - row["confirm_failures"], 0)
    return _described(
        result_of(row, presented), row, remaining_attempts=remaining if is_code_channel(presented) else None
    )


def _described(result: Result, row: dict[str, Any], **fields: Any) -> Outcome:
    presented = row["presented"]
    return Outcome(
        result,
        row["id"],
        row["account_id"],
        row["channel"],
        presented,
        verified_at=row["verified_at"],
        expires_at=row["expires_at"],
        destination_hint=mask_destination(presented, destination_of(row, presented)),
        locale=row["locale"],
        return_url=row.get("return_url"),
        verified_channel=row.get("verified_channel"),
        verified_via=row.get("verified_via"),
        proofs=proofs(row),
        **fields,
    )


def logged(outcome: Outcome) -> Outcome:
    _log.info(
        "confirmation %s",
        outcome.result,
        extra={
            "json_fields": {
                "event": "confirm",
                "result": outcome.result,
                "channel": outcome.presented,
                "verification_id": str(outcome.verification_id) if outcome.verification_id else None,
            }
        },
    )
    return outcome
