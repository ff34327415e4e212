"""`verifyctl webhooks test`: one signed `webhook.test` event straight to WEBHOOK_URL, and what the
receiver answered. Never written to the outbox: nothing retries it and no verification owns it.

It is signed as every event is (delivery/events.py through the webhook adapter's headers, one
signature per secret of WEBHOOK_SECRET), and the answer is classified as the outbox would classify
an event's (channels/webhook.py), so "accepted" here means the receiver would take real events.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..delivery.channels.base import SendResult
from ..delivery.channels.http import HttpClient, HttpFailure
from ..delivery.channels.webhook import WebhookChannel, classify
from ..delivery.events import EventContent
from ..delivery.webhook_config import WebhookConfig
from ..platform.errors import ConfigError
from ..platform.redaction import scrub
from ..platform.timestamps import rfc3339

TEST_EVENT = "webhook.test"


@dataclass(frozen=True)
class ProbeAnswer:
    url: str
    webhook_id: str
    sent_at: str
    status: int | None  # the receiver's HTTP status; None when no answer came
    outcome: str  # what the outbox would make of this answer for an event: accepted | retryable | ambiguous | failed
    detail: str | None  # the start of the receiver's body (scrubbed), or why there was no answer
    elapsed_ms: int

    def as_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "type": TEST_EVENT,
            "webhook_id": self.webhook_id,
            "sent_at": self.sent_at,
            "status": self.status,
            "outcome": self.outcome,
            "detail": self.detail,
            "elapsed_ms": self.elapsed_ms,
        }

    def render(self) -> str:
        answer = f"HTTP {self.status}" if self.status is not None else "no answer"
        said = f" ({self.detail})" if self.detail else ""
        return (
            f"{TEST_EVENT} {self.webhook_id} -> {self.url}: {answer} in {self.elapsed_ms} ms{said}; "
            f"an event answered so is {self.outcome}"
        )


def probe_event(now: datetime) -> EventContent:
    """A fresh id per test: each test is its own event (a receiver must not dedup two tests as one)."""
    return EventContent(0, "webhook-test", "msg_" + uuid.uuid4().hex, TEST_EVENT, now,
                        {"test": True, "sent_at": rfc3339(now)})  # fmt: skip


def probe(config: WebhookConfig, timeout: float, *, clock: Any = time.time) -> ProbeAnswer:
    if not config.url:
        raise ConfigError("WEBHOOK_URL is unset: webhooks are off, there is no receiver to test")
    if not config.secrets:
        raise ConfigError("WEBHOOK_URL needs WEBHOOK_SECRET (the test event is signed as every event is)")
    now = datetime.fromtimestamp(clock(), UTC)
    event = probe_event(now)
    client = HttpClient(timeout=timeout, pool_size=1)
    channel = WebhookChannel(config.url, config.secrets, client, clock=clock)
    body = event.body()
    started = time.monotonic()
    try:
        answer = client.post(config.url, started + timeout, body=body, headers=channel.headers(event, body))
    except HttpFailure as failure:
        return _answer(config.url, event, None, failure.result, failure.result.detail, started)
    finally:
        client.close()
    result = classify(answer.status, answer.headers.get("Retry-After"), answer.body)
    return _answer(config.url, event, answer.status, result, scrub(answer.body[:200], 120) or None, started)


def _answer(
    url: str, event: EventContent, status: int | None, result: SendResult, detail: str | None, started: float
) -> ProbeAnswer:
    elapsed = int((time.monotonic() - started) * 1000)
    return ProbeAnswer(url, event.webhook_id, event.data["sent_at"], status, str(result.outcome), detail, elapsed)
