"""Channel policy helpers: verifications with a fallback, made through the real create path."""

from __future__ import annotations

import re
import uuid

from signup_verification.platform.database import Database
from signup_verification.verifications.config import CreateConfig
from support.factories import created


def create_with_fallback(
    db: Database,
    config: CreateConfig,
    *,
    account: str = "acct-1",
    channel: str = "email",
    after_seconds: int = 30,
    email: str = "ada@example.com",
    phone: str = "+14155550100",
    key: str | None = None,
) -> uuid.UUID:
    other = "sms" if channel == "email" else "email"
    primary, fallback = (email, phone) if channel == "email" else (phone, email)
    fallback_field = {"channel": other, "destination": fallback, "after_seconds": after_seconds}
    return created(db, primary, account=account, key=key, config=config, fallback=fallback_field)


def intents(db: Database, verification_id: uuid.UUID) -> dict[str, dict]:
    """The verification's message intents by role."""
    rows = db.rows(
        "SELECT *, extract(epoch FROM next_attempt_at - created_at)::float8 AS due_after"
        " FROM delivery_intents WHERE verification_id = :v AND role <> 'event'",
        v=verification_id,
    )
    return {row["role"]: row for row in rows}


def code_in(body: str) -> str:
    return re.search(r"code is (\d{6})", body).group(1)


def token_in(text: str) -> str:
    return re.search(r"token=([A-Za-z0-9_-]+)", text).group(1)  # what the link carries, id and token
