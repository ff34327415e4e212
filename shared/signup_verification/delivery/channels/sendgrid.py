"""Email over SendGrid's v3 mail-send API (POST /v3/mail/send, JSON, bearer key).

SendGrid has no idempotency key on send; the stable Message-ID header we set lets mail clients
collapse a duplicate, and `custom_args` carry the intent and attempt ids into SendGrid's event
webhook for reconciliation. Responses (docs/channels.md; refusals classified by
delivery/classification/sendgrid.py): 2xx accepted (X-Message-Id is the provider ref); a 400 about
the recipient is the address's fault; a 400 about the sender (`from`, the sender identity), 401,
403, 406 and 415 are our configuration (the channel stops and alerts); other 400s and 413 refuse
our message; a 403 "temporarily blocked" (after repeated bad requests) is retryable after a long
wait, and stops the channel with an alert; 429 is retryable (Retry-After or X-RateLimit-Reset);
5xx are ambiguous: SendGrid does not say the message was not processed (an email resend is safe:
the stable Message-ID collapses it).
"""

from __future__ import annotations

import json
import time
from email.utils import parseaddr

from ...platform.redaction import scrub
from ..classification import sendgrid as table
from ..messages import EmailContent
from .base import BLOCKED, SendResult, forget, http_retry_after
from .http import HttpClient, HttpFailure

BLOCKED_WAIT_SECONDS = 1800.0  # SendGrid does not say how long a block lasts; hammering would extend it
_SENDER_WORDS = ("sender identity", "from address", "from email")


class SendGridChannel:
    channel = "email"
    transport = "sendgrid"

    def __init__(self, api_key: str, url: str, client: HttpClient):
        self._api_key = api_key
        self.url = url
        self.client = client

    def __repr__(self) -> str:
        return f"SendGridChannel({self.url!r})"

    def payload(self, message: EmailContent) -> bytes:
        name, address = parseaddr(message.sender)
        sender = {"email": address, **({"name": name} if name else {})}
        headers = dict(message.headers)
        headers["Message-ID"] = message.message_id
        return json.dumps(
            {
                "personalizations": [{"to": [{"email": message.to}]}],
                "from": sender,
                "subject": message.subject,
                "content": [
                    {"type": "text/plain", "value": message.text},
                    {"type": "text/html", "value": message.html},
                ],
                "headers": headers,
                "custom_args": {"intent_id": str(message.intent_id), "attempt_id": message.attempt_id},
                "tracking_settings": {"click_tracking": {"enable": False, "enable_text": False}},
            },
            ensure_ascii=False,
        ).encode("utf-8")

    def send(self, message: EmailContent, deadline: float) -> SendResult:
        return forget(self._send(message, deadline), message.secret)  # the rendered secret, by value

    def _send(self, message: EmailContent, deadline: float) -> SendResult:
        # Accept as the official client sends it: without it an API answering 406 would fail every email.
        headers = {
            "Authorization": f"Bearer {self._api_key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        }
        try:
            answer = self.client.post(self.url, deadline, body=self.payload(message), headers=headers)
        except HttpFailure as failure:
            return failure.result
        status = answer.status
        if 200 <= status < 300:
            return SendResult.accepted(answer.headers.get("X-Message-Id"))
        detail = f"sendgrid {status}: {_errors(answer.body)}"
        if status == 403 and "temporarily blocked" in _messages(answer.body):
            return SendResult.retryable(BLOCKED, detail, max(BLOCKED_WAIT_SECONDS, _wait(answer.headers) or 0.0))
        if status == 429:
            return SendResult.retryable("rate_limited", detail, _wait(answer.headers))
        if status >= 500:  # not "never processed": it may have been sent (docs/channels.md)
            return SendResult.ambiguous("provider_5xx", detail)
        about = None
        if status == 400:
            about = (
                "from" if _about_sender(answer.body) else "personalizations" if _about_recipient(answer.body) else None
            )
        return SendResult.refused(table.submission_verdict(status, about), detail)

    def close(self) -> None:
        self.client.close()


def _parsed(body: bytes) -> list[dict]:
    try:
        errors = json.loads(body or b"{}").get("errors") or []
    except (ValueError, AttributeError):
        return []
    return [e for e in errors if isinstance(e, dict)]


def _errors(body: bytes) -> str:
    errors = _parsed(body)
    if not errors:
        return scrub(body, 120)
    return scrub("; ".join(f"{e.get('field') or '-'}: {e.get('message') or ''}" for e in errors[:3]), 200)


def _messages(body: bytes) -> str:
    return " ".join(str(e.get("message") or "") for e in _parsed(body)).lower()


def _about_sender(body: bytes) -> bool:
    """A 400 about `from` or the sender identity: every message would be refused."""
    return any(
        str(e.get("field") or "").split(".")[0] == "from"
        or any(w in str(e.get("message") or "").lower() for w in _SENDER_WORDS)
        for e in _parsed(body)
    )


def _about_recipient(body: bytes) -> bool:
    return any(str(e.get("field") or "").startswith("personalizations") for e in _parsed(body))


def _wait(headers) -> float | None:
    retry_after = http_retry_after(headers.get("Retry-After"))
    if retry_after is not None:
        return retry_after
    reset = headers.get("X-RateLimit-Reset")  # epoch seconds when the window resets
    try:
        return max(0.0, float(reset) - time.time()) if reset else None
    except ValueError:
        return None
