"""The replay guard behind auth.authorize: a signed request is accepted once inside its window."""

from __future__ import annotations

from ..platform.catalogue import catalogue
from ..platform.database import Database
from .auth import FirstUse

_REMEMBER = catalogue("platform")["remember_signature"]


def first_use(db: Database) -> FirstUse:
    def remember(digest: bytes, expires_at: int) -> bool:
        """`digest`: the request's name (request_signatures.replay_digest), whichever MAC signed it."""
        return bool(db.run(_REMEMBER, digest=digest, expires_at=expires_at))

    return remember
