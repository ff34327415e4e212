"""Webhook events as the receiver sees them: the body, the ids, the Standard Webhooks
signature. No network and no database here: the adapter (channels/webhook.py) sends what this
builds, and tests/support use the same functions only where the standardwebhooks library is not the
judge.

    body         {"type": <event type>, "timestamp": <RFC 3339 event time>, "data": <intent payload>}
                 (the payload is written by record_event: never a token, a
                 code or a destination)
    webhook-id   stable per event (per intent: its verification, type and subject), whatever the
                 attempt: the receiver's dedup key
    webhook-timestamp  unix seconds of this send (receivers refuse stale ones)
    webhook-signature  'v1,<base64 HMAC-SHA256(secret, "<id>.<timestamp>.<body>")>', one per secret
                 of WEBHOOK_SECRET, space-separated (rotation: the receiver accepts either)
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..outbox.transitions import BegunAttempt, ClaimedIntent
from ..platform.timestamps import rfc3339

__all__ = ["EventContent", "render_event", "sign", "webhook_id"]
# A fixed namespace: the same verification and event type give the same webhook-id on every instance.
_ID_NAMESPACE = uuid.UUID("5a3c1f0e-7d52-4f8e-9a7c-2b6f4e1d9c30")


def webhook_id(verification_id: uuid.UUID, event_type: str, subject: str | None = None) -> str:
    """One id per logical event (the unique index allows one event per type, verification and
    subject), so every attempt of it, on any instance, carries the same id."""
    name = f"{verification_id}/{event_type}" + (f"/{subject}" if subject else "")
    return "msg_" + uuid.uuid5(_ID_NAMESPACE, name).hex


@dataclass(frozen=True, repr=False)
class EventContent:
    """The rendered event: what WebhookChannel posts (signed at send time)."""

    intent_id: int
    attempt_id: str
    webhook_id: str
    event_type: str
    occurred_at: datetime
    data: dict[str, Any]
    channel = "webhook"

    def __repr__(self) -> str:
        return f"EventContent(intent={self.intent_id}, type={self.event_type!r}, id={self.webhook_id!r})"

    def body(self) -> bytes:
        document = {"type": self.event_type, "timestamp": rfc3339(self.occurred_at), "data": self.data}
        return json.dumps(document, separators=(",", ":"), sort_keys=True).encode()


def render_event(intent: ClaimedIntent, attempt: BegunAttempt) -> EventContent:
    """The event time is the intent's creation: the transaction of the state change that wrote it."""
    if intent.event_type is None or intent.payload is None:
        raise ValueError(f"intent {intent.id} is not a webhook event")
    data = intent.payload if isinstance(intent.payload, dict) else json.loads(intent.payload)
    return EventContent(
        intent.id,
        attempt.attempt_id,
        webhook_id(intent.verification_id, intent.event_type, intent.event_subject),
        intent.event_type,
        intent.created_at,
        data,
    )


def sign(secrets: tuple[bytes, ...], msg_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return " ".join(
        "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode() for key in secrets
    )
