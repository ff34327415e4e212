"""Webhook events to the signup site: one signed POST to WEBHOOK_URL per attempt.

Behind the same Channel interface as email and SMS, so the dispatcher claims, begins, sends and
settles events with the same lease, fence and attempt log. Outcomes (docs/webhooks.md):
  2xx                       accepted
  408, 429, 5xx             retryable (429 and 503 honour Retry-After): the receiver said it did not take it
  301-308                   failed, configuration: redirects are never followed (WEBHOOK_URL is wrong)
  401, 403                  failed, configuration: the receiver refuses our signature (WEBHOOK_SECRET)
  other 4xx                 failed: the receiver refuses this event for good
  no connection             retryable (nothing was sent)
  timeout / reset after the request went out   ambiguous: resent after the hold (AMBIGUOUS_POLICY_WEBHOOK
                            'retry' by default) with the same webhook-id, which the receiver deduplicates on
The receiver's body is never stored beyond a short scrubbed excerpt.
"""

from __future__ import annotations

import time

from ...platform.redaction import scrub
from ..classification import unexplained
from ..events import EventContent, sign
from .base import SendResult, http_retry_after
from .http import HttpClient, HttpFailure

USER_AGENT = "signup-verification-webhooks/1"


class WebhookChannel:
    channel = "webhook"
    transport = "webhook"

    def __init__(self, url: str, secrets: tuple[bytes, ...], client: HttpClient, clock=time.time):
        self.url = url
        self._secrets = secrets
        self._client = client
        self._clock = clock

    def __repr__(self) -> str:  # never the secrets
        return f"WebhookChannel(url={self.url!r}, secrets={len(self._secrets)})"

    def headers(self, message: EventContent, body: bytes) -> dict[str, str]:
        timestamp = int(self._clock())  # the send time: receivers refuse a stale one (replay window)
        return {
            "content-type": "application/json",
            "user-agent": USER_AGENT,
            "webhook-id": message.webhook_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": sign(self._secrets, message.webhook_id, timestamp, body),
        }

    def send(self, message: EventContent, deadline: float) -> SendResult:
        body = message.body()
        try:
            answer = self._client.post(self.url, deadline, body=body, headers=self.headers(message, body))
        except HttpFailure as failure:
            return failure.result
        return classify(answer.status, answer.headers.get("Retry-After"), answer.body)

    def close(self) -> None:
        self._client.close()


def classify(status: int, retry_after: str | None, body: bytes) -> SendResult:
    excerpt = scrub(body[:200], 120)
    detail = f"HTTP {status}" + (f": {excerpt}" if excerpt else "")
    if 200 <= status < 300:
        return SendResult.accepted(f"HTTP {status}")
    if status in (408, 429) or status >= 500:
        wait = http_retry_after(retry_after) if status in (429, 503) else None
        return SendResult.retryable("receiver_busy" if status == 429 else "receiver_error", detail, retry_after=wait)
    if 300 <= status < 400:
        return SendResult.configuration(f"HTTP {status}: the receiver redirects; redirects are not followed", None)
    if status in (401, 403):
        return SendResult.configuration(f"{detail} (the receiver refuses our signature: WEBHOOK_SECRET)", None)
    return SendResult.failed("rejected", detail, unexplained(None, status))
