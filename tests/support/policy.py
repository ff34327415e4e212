"""Channel policy helpers: verifications with a fallback, made through the real create path."""

from __future__ import annotations

import hashlib
import json
import re
import uuid

from signup_verification.delivery import templates
from signup_verification.outbox import transitions as t
from signup_verification.outbox.transitions import Settlement
from signup_verification.platform.database import Database
from signup_verification.verifications import create as create_domain
from signup_verification.verifications.channel_policy import Fallback
from signup_verification.verifications.config import CreateConfig
from support.factories import KEYRING, created


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


# The steps of a three-step verification, each (channel, destination, after_seconds).
THREE_STEPS = (("email", "ada@example.com", 0), ("sms", "+14155550100", 60), ("whatsapp", "+14155550199", 120))


def create_steps(
    db: Database,
    config: CreateConfig,
    steps: tuple[tuple[str, str, int], ...] = THREE_STEPS,
    *,
    account: str = "acct-1",
    key: str | None = None,
) -> create_domain.CreateOutcome:
    """A verification of these ordered steps through the domain's create (verifications/create.py:
    below the edge, which takes the channels it sends on), with the create target's fingerprint."""
    (channel, destination, _), *later = steps
    request = {
        "account_id": account,
        "steps": [dict(zip(("channel", "destination", "after_seconds"), s, strict=True)) for s in steps],
    }
    new = create_domain.NewVerification(
        account_id=account,
        channel=channel,
        destination=destination,
        purpose="signup",
        locale="en",
        template_version=templates.current_version("signup"),
        fingerprint=hashlib.sha256(json.dumps(request, sort_keys=True).encode()).digest(),
        fallback=Fallback(*later[0]) if later else None,
        step3=Fallback(*later[1]) if len(later) > 1 else None,
    )
    return create_domain.create(db, config, KEYRING, new, key or f"k-{uuid.uuid4()}")


def steps_of(db: Database, verification_id: uuid.UUID) -> list[dict]:
    """The verification's message intents in step order."""
    return db.rows(
        "SELECT *, intent_step(verification_id, id) AS step,"
        " extract(epoch FROM next_attempt_at - created_at)::float8 AS due_after"
        " FROM delivery_intents WHERE verification_id = :v AND role <> 'event' ORDER BY id",
        v=verification_id,
    )


def sent(db: Database, verification_id: uuid.UUID, *channels: str) -> None:
    """The worker's send of these steps of the verification, through the outbox's own statements: due
    now, claimed, begun and accepted. Only then does their person hold the codes, and may a code
    prove. Whatever else the claim took is given back as it was (released: not an attempt)."""
    for channel in channels:
        db.run(
            "UPDATE delivery_intents SET next_attempt_at = least(next_attempt_at, now() - interval '1 second')"
            " WHERE verification_id = :v AND channel = :c AND event_type IS NULL",
            v=verification_id,
            c=channel,
        )
        claimed = t.claim(db, "test-sender", 1000, 30)
        mine = [i for i in claimed if i.verification_id == verification_id and i.channel == channel]
        t.release(db, "test-sender", [i.fence for i in claimed if i not in mine])
        assert len(mine) == 1, f"{verification_id}: no {channel} step to send"
        t.begin_attempts(db, "test-sender", [mine[0].fence])
        t.settle(db, "test-sender", [Settlement(mine[0].id, mine[0].lease_version, "accepted", provider_ref="SMsent")])
