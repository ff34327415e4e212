"""The read endpoint's edge: `GET /<verification_id>` on the create_verification target.

The path's id must be a UUID in its canonical 36-character form; anything else, and an id no
verification has, is the same 404 problem+json (a malformed id cannot exist, so it is not 'bad input'
to fix but a resource that is not there).
"""

from __future__ import annotations

import re
import uuid

from ..platform.database import Database
from ..verifications import read as domain
from ..verifications.tokens import Keyring
from .http import Response, json_response
from .problems import Problem

_CANONICAL_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
NO_STORE = {"Cache-Control": "no-store"}


def not_found() -> Problem:
    return Problem(
        404,
        "verification-not-found",
        "No such verification",
        "GET /<verification_id> takes the verification_id of a create answer.",
        headers=dict(NO_STORE),
    )


def parse_id(path: str) -> uuid.UUID | None:
    """'/<uuid>' (one segment, a trailing slash allowed) -> the UUID; anything else -> None."""
    segment = path.strip("/")
    return uuid.UUID(segment) if _CANONICAL_UUID.fullmatch(segment) else None


def read_answer(db: Database, keyring: Keyring, link_base: str, path: str) -> Response:
    verification_id = parse_id(path)
    view = domain.read(db, keyring, link_base, verification_id) if verification_id is not None else None
    if view is None:
        raise not_found()
    return json_response(view.as_json(), 200, dict(NO_STORE))
