"""Confirming a verification: the email link's token or the SMS code, consumed once.

Looking a link up never changes anything (mail scanners and link previews fetch links); only
`confirm_link` / `confirm_code` consume, with one UPDATE that requires the verification pending,
unexpired and the matched digest (confirm_consume.sql), so two concurrent confirmations verify once.

Digests are keyed HMACs (tokens.py). A link is found by its digest under every key of the ring,
in rotation order; the candidate row's digest is then compared again, in constant time, under the
key that row names. A code is compared under every key, without stopping at the first match.
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

from ..api import problems
from ..platform.database import Database, load_sql
from ..platform.redaction import mask_destination
from ..platform.errors import ConfigError
from .tokens import Keyring

_log = logging.getLogger("signup_verification.verifications.confirm")

_LOOKUP_LINK = load_sql(__file__, "confirm_lookup_link.sql")
_STATE = load_sql(__file__, "confirm_state.sql")
_CONSUME = load_sql(__file__, "confirm_consume.sql")
_WRONG_CODE = load_sql(__file__, "confirm_wrong_code.sql")

# A link token is 32 bytes of HMAC in unpadded base64url (tokens.TokenKey.link_token).
_TOKEN_SHAPE = re.compile(r"^[A-Za-z0-9_-]{43}$")
_CODE_SEPARATORS = re.compile(r"[\s-]")

# Results. `pending` only comes from a look-up (the link still works); the rest end a confirmation.
PENDING = "pending"
VERIFIED = "verified"                  # consumed by this request
ALREADY_VERIFIED = "already_verified"  # consumed earlier: the person is done, nothing to fix
EXPIRED = "expired"
SUPERSEDED = "superseded"              # a newer message replaced this one
LOCKED = "locked"                      # too many wrong codes
WRONG_CODE = "wrong_code"              # counted; tries remain
INVALID = "invalid"                    # unknown or malformed: says nothing more


@dataclass(frozen=True)
class ConfirmConfig:
    code_digits: int = 6  # SMS_CODE_DIGITS: the shape a typed code must have
    product_name: str = "Example"  # PRODUCT_NAME: shown on the confirmation pages


@dataclass(frozen=True)
class Outcome:
    result: str
    verification_id: uuid.UUID | None = None
    account_id: str | None = None
    channel: str | None = None
    verified_at: datetime | None = None
    expires_at: datetime | None = None
    destination_hint: str | None = None  # masked, for the page the token's holder asked for
    remaining_attempts: int | None = None

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
def _find_link(db: Database, keyring: Keyring, token: str | None) -> tuple[dict[str, Any], bytes] | None:
    """The verification this link token belongs to and its digest, or None. Reads only."""
    if not token or not _TOKEN_SHAPE.match(token):
        return None  # not one of ours: no query, no timing difference worth measuring
    digests = [key.link_digest(token) for key in keyring.keys]
    for row in db.rows(_LOOKUP_LINK, digests=digests):
        try:
            key = keyring.get(row["key_id"])
        except ConfigError:
            _log.error("verification %s names token key %r, which is no longer configured", row["id"], row["key_id"])
            continue
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


def confirm_link(db: Database, keyring: Keyring, token: str | None) -> Outcome:
    found = _find_link(db, keyring, token)
    if found is None:
        _log.info("confirmation refused: unknown link", extra={"json_fields": {"event": "confirm", "result": INVALID}})
        return Outcome(INVALID)
    row, digest = found
    return _consume(db, row, digest)


# -- SMS codes --------------------------------------------------------------------------------
def confirm_code(db: Database, keyring: Keyring, verification_id: uuid.UUID, code: str) -> Outcome:
    """`code` must already be normalised (normalise_code). A wrong code counts as one try."""
    row = db.one(_STATE, id=verification_id)
    if row is None or row["channel"] != "sms":
        _log.info("confirmation refused: unknown verification", extra={"json_fields": {"event": "confirm", "result": INVALID}})
        return Outcome(INVALID)
    stored = bytes(row["token_digest"])
    matched: bytes | None = None
    for key in keyring.keys:  # every key, no early exit: the time does not depend on which matched
        digest = key.code_digest(verification_id, code)
        if hmac.compare_digest(digest, stored):
            matched = digest
    if row["status"] != "pending" or row["expires_at"] <= row["db_now"]:
        # A dead verification counts no tries; only the right code may hear "already verified".
        return _logged(_unmatched(_from_state(row), matched))
    if matched is not None:
        return _consume(db, row, matched)
    failed = db.one(_WRONG_CODE, id=verification_id)
    if failed is None:  # it stopped being pending between the two statements
        return _logged(_unmatched(_from_state(db.one(_STATE, id=verification_id) or row), None))
    remaining = failed["max_confirm_failures"] - failed["confirm_failures"]
    result = LOCKED if failed["status"] == "locked" else WRONG_CODE
    return _logged(Outcome(result, verification_id, row["account_id"], "sms", expires_at=row["expires_at"],
                           remaining_attempts=max(remaining, 0)))


# -- shared -----------------------------------------------------------------------------------
def _consume(db: Database, row: dict[str, Any], digest: bytes) -> Outcome:
    consumed = db.one(_CONSUME, id=row["id"], digest=digest)
    if consumed is not None:
        return _logged(Outcome(VERIFIED, consumed["id"], consumed["account_id"], row["channel"],
                               verified_at=consumed["verified_at"], expires_at=row["expires_at"],
                               destination_hint=mask_destination(row["channel"], row["destination"])))
    # Lost the race or the state changed since the look-up: read it again in a fresh statement.
    latest = db.one(_STATE, id=row["id"]) or row
    return _logged(_from_state(latest))


def _unmatched(outcome: Outcome, matched: bytes | None) -> Outcome:
    """A wrong code never learns that a verification was confirmed, nor its account (issue 15, 6)."""
    return Outcome(INVALID) if matched is None and outcome.is_verified else outcome


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
    return Outcome(result, row["id"], row["account_id"], row["channel"], verified_at=row["verified_at"],
                   expires_at=row["expires_at"], destination_hint=mask_destination(row["channel"], row["destination"]),
                   remaining_attempts=remaining if row["channel"] == "sms" else None)


def _logged(outcome: Outcome) -> Outcome:
    _log.info("confirmation %s", outcome.result, extra={"json_fields": {
        "event": "confirm", "result": outcome.result, "channel": outcome.channel,
        "verification_id": str(outcome.verification_id) if outcome.verification_id else None}})
    return outcome


# -- the JSON API (POST application/json) -----------------------------------------------------
# Dead verifications answer 410 Gone: nothing the caller sends can revive them, only a new
# verification helps. A wrong code is 422 with the tries left; an unknown token or id is one
# generic 404 that says nothing about accounts or destinations.
NO_STORE = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
_GONE = {
    EXPIRED: ("verification-expired", "This verification has expired",
              "Ask the site for a new link or code."),
    SUPERSEDED: ("verification-superseded", "A newer verification replaced this one",
                 "Use the most recent link or code that was sent."),
    LOCKED: ("verification-locked", "Too many wrong codes",
             "This verification is locked. Ask the site for a new code."),
}


def parse_json_request(body: dict[str, Any], code_digits: int) -> tuple[str, Any]:
    """`{token}` -> ('link', token); `{verification_id, code}` -> ('code', (uuid, code)); else 400."""
    if set(body) == {"token"}:
        if not isinstance(body["token"], str):
            raise problems.bad_request("token must be a string.", [{"pointer": "#/token", "detail": "must be a string"}])
        return "link", body["token"]
    if set(body) == {"verification_id", "code"}:
        errors = []
        verification_id = body["verification_id"]
        try:
            parsed_id = uuid.UUID(verification_id) if isinstance(verification_id, str) else None
        except ValueError:
            parsed_id = None
        if parsed_id is None:
            errors.append({"pointer": "#/verification_id", "detail": "must be a UUID string"})
        code = body["code"]
        try:
            normalised = normalise_code(code, code_digits) if isinstance(code, str) else None
        except MalformedCode:
            normalised = None
        if normalised is None:
            errors.append({"pointer": "#/code", "detail": f"must be a string of {code_digits} digits"})
        if errors:
            raise problems.bad_request("The body failed validation (not counted as a try).", errors)
        return "code", (parsed_id, normalised)
    raise problems.bad_request("Send {\"token\": ...} for a link, or {\"verification_id\": ..., \"code\": ...}.",
                               [{"pointer": "#", "detail": "expected exactly token, or verification_id and code"}])


def json_answer(outcome: Outcome) -> tuple[dict[str, Any], int, dict[str, str]]:
    """200 body for a verified outcome; raises the Problem for every other one."""
    if outcome.is_verified:
        body = {"verification_id": str(outcome.verification_id), "account_id": outcome.account_id,
                "channel": outcome.channel, "status": "verified",
                "verified_at": outcome.verified_at.isoformat().replace("+00:00", "Z") if outcome.verified_at else None,
                "already_verified": outcome.result == ALREADY_VERIFIED}
        return body, 200, dict(NO_STORE)
    if outcome.result in _GONE:
        slug, title, detail = _GONE[outcome.result]
        raise problems.Problem(410, slug, title, detail, headers=dict(NO_STORE))
    if outcome.result == WRONG_CODE:
        raise problems.Problem(422, "code-incorrect", "The code is not correct", "Check the code and try again.",
                               headers=dict(NO_STORE), extensions={"remaining_attempts": outcome.remaining_attempts})
    raise problems.Problem(404, "verification-not-found", "This link or code is not valid",
                           "Check that the whole link was opened, or ask the site for a new one.", headers=dict(NO_STORE))
