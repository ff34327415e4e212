"""The signature replay guard behind auth.authorize: a signature is accepted once inside its window."""

from __future__ import annotations

import hashlib

from ..platform.database import Database, load_sql
from .auth import FirstUse


def first_use(db: Database) -> FirstUse:
    def remember(mac: bytes, expires_at: int) -> bool:
        digest = hashlib.sha256(mac).digest()  # the MAC itself is not a secret, but need not be kept either
        return bool(db.run(load_sql(__file__, "signature_replay.sql"), digest=digest, expires_at=expires_at))

    return remember
