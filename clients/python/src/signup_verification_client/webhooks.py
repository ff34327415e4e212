"""Verifying the service's webhooks (Standard Webhooks: webhook-id, webhook-timestamp,
webhook-signature) through the `standardwebhooks` library, against one or more `whsec_...` secrets.

The receiver must verify the raw body bytes exactly as received, before parsing them, and should
deduplicate on `webhook-id`: an event whose delivery outcome was ambiguous is sent again, with the
same id.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from standardwebhooks import Webhook

from .errors import InvalidWebhook


@dataclass(frozen=True)
class WebhookEvent:
    id: str  # webhook-id: the same on every resend of this event (the deduplication key)
    # verification.verified | verification.proved | verification.expired | verification.locked |
    # delivery.failed, and the opt-in delivery.delivered | delivery.bounced; webhook.test from
    # `verifyctl webhooks test`
    type: str
    timestamp: str
    data: dict[
        str, Any
    ]  # docs/openapi.yaml's `webhooks` schemas; verification.proved's data["proof"] names what was proved


def secrets_of(setting: str | Iterable[str]) -> list[str]:
    """WEBHOOK_SECRET's form ('whsec_a,whsec_b') or a list of secrets."""
    items = setting.split(",") if isinstance(setting, str) else list(setting)
    return [s.strip() for s in items if s and s.strip()]


def verify_webhook(body: bytes, headers: Mapping[str, str], secrets: str | Iterable[str]) -> WebhookEvent:
    """The verified event, or InvalidWebhook. Any of `secrets` may have signed it (rotation)."""
    flat = {str(k).lower(): str(v) for k, v in headers.items()}
    for secret in secrets_of(secrets):
        try:
            payload = Webhook(secret).verify(body, flat)
        except Exception:  # the library raises several types (bad header, base64, JSON): all mean "no"
            continue
        if not isinstance(payload, dict) or not isinstance(payload.get("type"), str):
            raise InvalidWebhook("the body is not a webhook event")
        data = payload.get("data")
        return WebhookEvent(
            flat["webhook-id"],
            payload["type"],
            str(payload.get("timestamp", "")),
            data if isinstance(data, dict) else {},
        )
    raise InvalidWebhook("no valid signature (or the timestamp is outside 5 minutes)")
