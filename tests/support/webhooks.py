"""Webhook test set-up (issue 12): a database session with events on, a config that sends them to a
local receiver, and the reads the tests assert on."""

from __future__ import annotations

import uuid

from signup_verification.delivery.webhook_config import WebhookConfig
from signup_verification.platform.database import ConnectionParams, Database
from support.dispatch import KEYRING, provider_settings


def events_database(url: str, max_attempts: int = 12) -> Database:
    """What Runtime builds when WEBHOOK_URL is set: the session setting rides in the start-up packet."""
    settings = WebhookConfig(url="http://receiver.invalid/", max_attempts=max_attempts).session_settings()
    return Database(ConnectionParams.from_url(url), session_settings=settings)


def webhook_settings(receiver, **overrides):
    return provider_settings(webhook_url=receiver.endpoint, webhook_secret=",".join(receiver.secrets), **overrides)


def events(db: Database, verification_id: uuid.UUID | None = None) -> list[dict]:
    sql = (
        "SELECT id, verification_id, event_type, status, attempts, payload, last_error FROM delivery_intents"
        " WHERE role = 'event'" + (" AND verification_id = :v" if verification_id else "") + " ORDER BY id"
    )
    return db.rows(sql, **({"v": verification_id} if verification_id else {}))


def link_token(db: Database, verification_id: uuid.UUID) -> str:
    row = db.one("SELECT key_id, token_nonce FROM verifications WHERE id = :id", id=verification_id)
    return KEYRING.get(row["key_id"]).link(verification_id, bytes(row["token_nonce"]))


def sms_code(db: Database, verification_id: uuid.UUID) -> str:
    row = db.one("SELECT key_id, token_nonce FROM verifications WHERE id = :id", id=verification_id)
    return KEYRING.get(row["key_id"]).sms_code(verification_id, bytes(row["token_nonce"]), 6)
