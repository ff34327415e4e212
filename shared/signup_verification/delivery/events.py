"""Webhook events as the receiver sees them (issue 12): the body, the ids, the Standard Webhooks
signature. No network and no database here: the adapter (channels/webhook.py) sends what this
builds, and tests/support use the same functions only where the standardwebhooks library is not the
judge.

    body         {"type": <event type>, "timestamp": <RFC 3339 event time>, "data": <intent payload>}
                 (the payload is written by sql/definitions/10_record_event.sql: never a token, a
                 code or a destination)
    webhook-id   stable per event (per intent), whatever the attempt: the receiver's dedup key
    webhook-timestamp  unix seconds of this send (receivers refuse stale ones)
    webhook-signature  'v1,<base64 HMAC-SHA256(secret, "<id>.<timestamp>.<body>")>', one per secret
                 of WEBHOOK_SECRET, space-separated (rotation: the receiver accepts either)
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlparse

from ..outbox.transitions import BegunAttempt, ClaimedIntent
from ..platform.errors import ConfigError

SECRET_PREFIX = "whsec_"  # the format's prefix, not a secret  # nosec B105
EVENT_TYPES = ("verification.verified", "verification.expired", "verification.locked", "delivery.failed")
# A fixed namespace: the same verification and event type give the same webhook-id on every instance.
_ID_NAMESPACE = uuid.UUID("5a3c1f0e-7d52-4f8e-9a7c-2b6f4e1d9c30")


@dataclass(frozen=True)
class WebhookConfig:
    url: str | None = None  # WEBHOOK_URL: unset = webhooks off (no event is even written)
    secrets: tuple[bytes, ...] = field(default=(), repr=False)  # WEBHOOK_SECRET: whsec_<base64>[,whsec_...]
    max_attempts: int = 12  # WEBHOOK_MAX_ATTEMPTS: with the backoff ceiling, about 2.5 h of receiver outage

    @property
    def enabled(self) -> bool:
        return self.url is not None

    def session_settings(self) -> dict[str, str]:
        """What the database must know, sent in each connection's start-up packet (no round trip):
        record_event() writes events only when `signup_verification.webhooks` is 'on'."""
        if not self.enabled:
            return {}
        return {
            "signup_verification.webhooks": "on",
            "signup_verification.webhook_max_attempts": str(self.max_attempts),
        }


def parse_secrets(raw: str) -> tuple[bytes, ...]:
    """'whsec_<base64>,whsec_<base64>' -> the HMAC keys; a ConfigError names the bad entry by position."""
    keys = []
    for position, entry in enumerate((e.strip() for e in raw.split(",")), start=1):
        if not entry:
            continue
        if not entry.startswith(SECRET_PREFIX):
            raise ConfigError(f"WEBHOOK_SECRET entry {position} must start with {SECRET_PREFIX}")
        try:
            key = base64.b64decode(entry[len(SECRET_PREFIX) :], validate=True)
        except (binascii.Error, ValueError):
            raise ConfigError(f"WEBHOOK_SECRET entry {position} is not valid base64 after {SECRET_PREFIX}") from None
        if len(key) < 24:
            raise ConfigError(f"WEBHOOK_SECRET entry {position} is too short (at least 24 bytes of key)")
        keys.append(key)
    if not keys:
        raise ConfigError("WEBHOOK_SECRET holds no secret")
    return tuple(keys)


def check_url(url: str, production: bool) -> str:
    """WEBHOOK_URL: absolute http(s); https in production (a signed body still must not travel in clear)."""
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ConfigError(f"WEBHOOK_URL must be an absolute http(s) URL, got {url!r}")
    if production and parsed.scheme != "https":
        raise ConfigError("WEBHOOK_URL must be https in production")
    if parsed.username or parsed.password:
        raise ConfigError("WEBHOOK_URL must not carry credentials (the signature authenticates us)")
    return url


def webhook_id(verification_id: uuid.UUID, event_type: str) -> str:
    """One id per logical event (the unique index allows one event per type per verification), so
    every attempt of it, on any instance, carries the same id."""
    return "msg_" + uuid.uuid5(_ID_NAMESPACE, f"{verification_id}/{event_type}").hex


def rfc3339(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


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
        webhook_id(intent.verification_id, intent.event_type),
        intent.event_type,
        intent.created_at,
        data,
    )


def sign(secrets: tuple[bytes, ...], msg_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return " ".join(
        "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode() for key in secrets
    )
