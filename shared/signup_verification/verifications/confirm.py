"""Confirming a verification: the email link's token or the SMS code, consumed once.

Looking a link up never changes anything (mail scanners and link previews fetch links); only
`confirm_link` / `confirm_code` consume, with one UPDATE that requires the verification pending,
unexpired and the matched digest (confirm_consume.sql), so two concurrent confirmations verify once.

A code attempt against a finished verification (verified, expired, superseded, locked) is answered
FINISHED whatever the state (the read API is where the site learns which), and a wrong one is
counted there too, against the verification's and the destination's budgets: guessing after the
end costs what guessing before it does. Only the right code of a verified verification hears
ALREADY_VERIFIED.

Digests are keyed HMACs (tokens.py). A link names its verification (sql/016: the id, then the token),
whose row is read by primary key; the token's digest under the key that row names must be the row's
(compared in SQL to consume, in constant time to show the page). An old-style link (the token alone)
is found by its digest under every key of the ring, in rotation order. A code is compared under
every key, without stopping at the first match.
"""

from __future__ import annotations

import hmac
import logging
import re
import unicodedata
import uuid
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from ..platform.database import Database, load_sql
from ..platform.errors import ConfigError
from ..platform.redaction import mask_destination
from .tokens import Keyring, split_link

_log = logging.getLogger("signup_verification.verifications.confirm")

_LEGACY_LINK = load_sql(__file__, "confirm_link_legacy.sql")
_STATE = load_sql(__file__, "confirm_state.sql")
_CONSUME = load_sql(__file__, "confirm_consume.sql")
_CONFIRM_LINK = load_sql(__file__, "confirm_link.sql")
_WRONG_CODE = load_sql(__file__, "confirm_wrong_code.sql")
_DESTINATION_FAILURES = load_sql(__file__, "confirm_destination_failures.sql")
_LOCK_DESTINATION = load_sql(__file__, "confirm_lock_destination.sql")

# A link carries the verification id and 32 bytes of HMAC, unpadded base64url (tokens.TokenKey.link);
# an old-style link (before sql/016) the HMAC alone.
_TOKEN_SHAPE = re.compile(r"^(?:[A-Za-z0-9_-]{22})?[A-Za-z0-9_-]{43}$")
_CODE_SEPARATORS = re.compile(r"[\s-]")


class Result(StrEnum):
    """What a look-up or a confirmation found. Outcomes only: api/confirm.py renders each one."""

    PENDING = "pending"  # only from a look-up: the link still works
    VERIFIED = "verified"  # consumed by this request
    ALREADY_VERIFIED = "already_verified"  # consumed earlier: the person is done, nothing to fix
    EXPIRED = "expired"
    SUPERSEDED = "superseded"  # a newer message replaced this one
    LOCKED = "locked"  # too many wrong codes
    WRONG_CODE = "wrong_code"  # counted; `remaining_attempts` tries remain
    FINISHED = "finished"  # a code for a verification that ended, whichever way: says nothing more
    INVALID = "invalid"  # unknown or malformed (not found): says nothing more


PENDING, VERIFIED, ALREADY_VERIFIED, EXPIRED = Result.PENDING, Result.VERIFIED, Result.ALREADY_VERIFIED, Result.EXPIRED
SUPERSEDED, LOCKED, WRONG_CODE, INVALID = Result.SUPERSEDED, Result.LOCKED, Result.WRONG_CODE, Result.INVALID
FINISHED = Result.FINISHED


@dataclass(frozen=True)
class Outcome:
    result: Result
    verification_id: uuid.UUID | None = None
    account_id: str | None = None
    channel: str | None = None
    verified_at: datetime | None = None
    expires_at: datetime | None = None
    destination_hint: str | None = None  # masked, for the page the token's holder asked for
    remaining_attempts: int | None = None
    locale: str | None = None  # the verification's (its message used it): its page follows
    return_url: str | None = None  # the site's page the Continue / back links go to (stored, checked at create)
    verified_channel: str | None = None  # whose secret proved it: 'email' (the link) or 'sms' (the code)
    verified_via: str | None = None  # 'link' | 'code'

    @property
    def is_verified(self) -> bool:
        return self.result in (VERIFIED, ALREADY_VERIFIED)


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
def _link_target(db: Database, keyring: Keyring, link: str | None) -> tuple[uuid.UUID, str] | None:
    """The verification id a link names and its token, or None when it cannot be one of ours.
    An old-style link (the token alone) is looked up by its digest (confirm_link_legacy.sql)."""
    if not link or not _TOKEN_SHAPE.match(link):
        return None  # not one of ours: no query, no timing difference worth measuring
    verification_id, token = split_link(link)
    if not token:
        return None
    if verification_id is None:
        found = db.one(_LEGACY_LINK, digests=[key.link_digest(token) for key in keyring.keys])
        if found is None:
            return None
        verification_id = found["id"]
    return verification_id, token


def _find_link(db: Database, keyring: Keyring, link: str | None) -> tuple[dict[str, Any], bytes] | None:
    """The verification this link belongs to and its digest, or None. Reads only."""
    target = _link_target(db, keyring, link)
    if target is None:
        return None
    verification_id, token = target
    state = db.one(_STATE, id=verification_id)
    row = as_channel(state, "email") if state is not None else None  # the email may be the fallback
    if row is None:
        return None
    try:
        key = keyring.get(row["key_id"])
    except ConfigError:
        _log.error("verification %s names token key %r, which is no longer configured", row["id"], row["key_id"])
        return None
    digest = key.link_digest(token)
    if hmac.compare_digest(digest, bytes(row["token_digest"])):
        return row, digest
    return None


def preview_link(db: Database, keyring: Keyring, token: str | None) -> Outcome:
    """What the link's page shows (GET): never writes."""
    found = _find_link(db, keyring, token)
    if found is None:
        return Outcome(INVALID)
    return _from_state(found[0])


def confirm_link(db: Database, keyring: Keyring, link: str | None) -> Outcome:
    """Find and consume in one statement (confirm_link.sql): no look-up round trip first (but for an
    old-style link, whose verification is found by its digest)."""
    found = None
    target = _link_target(db, keyring, link)
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
    row = as_channel(found, "email") or found  # the email may be the fallback channel
    if found["consumed_at"] is not None:
        return _verified(row, found["id"], found["account_id"], found["consumed_at"], "email", "link")
    if row["status"] != "pending":  # already dead in this statement's snapshot: nothing raced it
        return _logged(_from_state(row))
    return _restate(db, row)


# -- SMS codes --------------------------------------------------------------------------------
def confirm_code(
    db: Database, keyring: Keyring, verification_id: uuid.UUID, code: str, failures_per_day: int = 0
) -> Outcome:
    """`code` must already be normalised (normalise_code). A wrong code counts as one try.
    `failures_per_day` (> 0): once the destination had that many wrong codes in a day, across all its
    verifications, every code is answered locked, the right one too (else the answer is an oracle)."""
    state = db.one(_STATE, id=verification_id)
    row = as_channel(state, "sms") if state is not None else None  # the SMS may be the fallback
    if row is None:
        _log.info(
            "confirmation refused: unknown verification", extra={"json_fields": {"event": "confirm", "result": INVALID}}
        )
        return Outcome(INVALID)
    stored = bytes(row["token_digest"])
    matched: bytes | None = None
    for key in keyring.keys:  # every key, no early exit: the time does not depend on which matched
        digest = key.code_digest(verification_id, code)
        if hmac.compare_digest(digest, stored):
            matched = digest
    if row["status"] != "pending" or row["expires_at"] <= row["db_now"]:
        return _logged(_finished(db, row, matched))
    if failures_per_day > 0 and db.single(_DESTINATION_FAILURES, id=verification_id)["failures"] >= failures_per_day:
        _log.warning(
            "confirmation refused: destination over its daily wrong-code budget",
            extra={"json_fields": {"event": "confirm", "result": LOCKED, "reason": "destination_failures"}},
        )
        db.one(_LOCK_DESTINATION, id=verification_id)  # locked for real: the site reads and hears `locked`
        return Outcome(
            LOCKED,
            verification_id,
            row["account_id"],
            "sms",
            expires_at=row["expires_at"],
            locale=row["locale"],
            return_url=row.get("return_url"),
        )
    if matched is not None:
        return _consume(db, row, matched)
    failed = db.one(_WRONG_CODE, id=verification_id)
    if failed is None:  # purged between the two statements
        return _logged(Outcome(INVALID))
    if failed["status"] not in ("pending", "locked"):  # it ended between the two statements
        return _logged(Outcome(FINISHED, locale=row["locale"]))
    remaining = failed["max_confirm_failures"] - failed["confirm_failures"]
    result = LOCKED if failed["status"] == "locked" else WRONG_CODE
    return _logged(
        Outcome(
            result,
            verification_id,
            row["account_id"],
            "sms",
            expires_at=row["expires_at"],
            remaining_attempts=max(remaining, 0),
            locale=row["locale"],
        )
    )


# -- shared -----------------------------------------------------------------------------------
def _finished(db: Database, row: dict[str, Any], matched: bytes | None) -> Outcome:
    """A code for a verification that ended. The right code of a verified one hears that it is done;
    any other code hears FINISHED, and a wrong one is counted (confirm_wrong_code.sql)."""
    if matched is not None and row["status"] == "verified":
        return _from_state(row)
    if matched is None:
        db.one(_WRONG_CODE, id=row["id"])
    return Outcome(FINISHED, locale=row["locale"])


def _consume(db: Database, row: dict[str, Any], digest: bytes) -> Outcome:
    consumed = db.one(_CONSUME, id=row["id"], digest=digest)
    if consumed is not None:
        return _verified(row, consumed["id"], consumed["account_id"], consumed["verified_at"], "sms", "code")
    restated = _restate(db, row)
    return restated if restated.result in (ALREADY_VERIFIED, PENDING) else Outcome(FINISHED, locale=row["locale"])


def _verified(
    row: dict[str, Any], verification_id: uuid.UUID, account_id: str, verified_at: datetime, channel: str, via: str
) -> Outcome:
    return _logged(
        Outcome(
            VERIFIED,
            verification_id,
            account_id,
            row["channel"],
            verified_at=verified_at,
            expires_at=row["expires_at"],
            destination_hint=mask_destination(row["channel"], row["destination"]),
            locale=row["locale"],
            return_url=row.get("return_url"),
            verified_channel=channel,
            verified_via=via,
        )
    )


def _restate(db: Database, row: dict[str, Any]) -> Outcome:
    # Lost the race or the state changed since the look-up: read it again in a fresh statement.
    latest = db.one(_STATE, id=row["id"])
    return _logged(_from_state((as_channel(latest, row["channel"]) if latest else None) or row))


def as_channel(row: dict[str, Any], channel: str) -> dict[str, Any] | None:
    """The row as seen from one message channel (its digest and destination), or None when the
    verification has no such channel. The primary channel's row is the row itself."""
    if row["channel"] == channel:
        return row
    if row.get("fallback_channel") != channel:
        return None
    return {
        **row,
        "channel": channel,
        "destination": row["fallback_destination"],
        "token_digest": row["fallback_digest"],
    }


def _from_state(row: dict[str, Any]) -> Outcome:
    status = row["status"]
    if status == "verified":
        result = ALREADY_VERIFIED
    elif status == "pending" and row["expires_at"] > row["db_now"]:
        result = PENDING
    elif status in ("pending", "expired"):  # expires_at is the truth; the status catches up lazily
        result = EXPIRED
    elif status == "superseded":
        result = SUPERSEDED
    else:
        result = LOCKED
    remaining = max(row["max_confirm_failures"] - row["confirm_failures"], 0)
    return Outcome(
        result,
        row["id"],
        row["account_id"],
        row["channel"],
        verified_at=row["verified_at"],
        expires_at=row["expires_at"],
        destination_hint=mask_destination(row["channel"], row["destination"]),
        remaining_attempts=remaining if row["channel"] == "sms" else None,
        locale=row["locale"],
        return_url=row.get("return_url"),
        verified_channel=row.get("verified_channel"),
        verified_via=row.get("verified_via"),
    )


def _logged(outcome: Outcome) -> Outcome:
    _log.info(
        "confirmation %s",
        outcome.result,
        extra={
            "json_fields": {
                "event": "confirm",
                "result": outcome.result,
                "channel": outcome.channel,
                "verification_id": str(outcome.verification_id) if outcome.verification_id else None,
            }
        },
    )
    return outcome
