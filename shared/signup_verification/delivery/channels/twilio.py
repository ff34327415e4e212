"""SMS over Twilio's Messages API (POST /2010-04-01/Accounts/{sid}/Messages.json, form-encoded,
HTTP Basic with the account SID and auth token).

Twilio has no idempotency key on message create, so an ambiguous SMS is held by default
(outbox/config.py): a duplicate code reaches a phone. A refusal's error code is classified by
delivery/classification/twilio.py (whose fault, which reason, its scope; docs/channels.md): a
recipient's (21211 invalid To, 21610 STOP, 21614 not a mobile, ...) suppresses the number; an
account fault that every message meets (20003 credentials, 21661 From not SMS-capable, 63038 the
daily limit, ...) stops the channel and alerts; a route fault (21606, 21612, 21408: our sender
towards the destination's country) fails that message and counts towards holding that route only;
21611 (the sender's queue is full) slows the channel down like a 429.
Without a listed code: HTTP 401/403/404 are our configuration; 20429 / HTTP 429 "never processed"
is retryable, honouring Retry-After; 5xx are ambiguous (Twilio does not say the message was not
created), and a 503's Retry-After holds the retry at least that long.
"""

from __future__ import annotations

import json
from base64 import b64encode
from urllib.parse import quote, urlencode

from ...platform.redaction import scrub
from ..classification import Rule, Verdict, unexplained
from ..classification import twilio as table
from ..messages import SmsContent
from .base import SendResult, forget, http_retry_after
from .http import HttpClient, HttpFailure


class TwilioChannel:
    channel = "sms"
    transport = "twilio"

    @staticmethod
    def find(code: int) -> Rule | None:
        """A code's row in the channel's classification table."""
        return table.ERRORS.get(code)

    def __init__(
        self,
        account_sid: str,
        auth_token: str,
        sender: str,
        api_url: str,
        client: HttpClient,
        status_callback: str | None = None,
    ):
        self.status_callback = status_callback
        self.account_sid = account_sid
        self._authorization = "Basic " + b64encode(f"{account_sid}:{auth_token}".encode()).decode()
        self.sender = sender
        self.url = f"{api_url.rstrip('/')}/2010-04-01/Accounts/{quote(account_sid, safe='')}/Messages.json"
        self.client = client

    def __repr__(self) -> str:
        return f"TwilioChannel({self.url!r})"

    def form(self, message: SmsContent) -> bytes:
        # A Messaging Service SID (MG...) chooses the sender itself.
        sender_field = "MessagingServiceSid" if self.sender.startswith("MG") else "From"
        fields = {"To": message.to, sender_field: self.sender, "Body": message.body}
        if self.status_callback:  # queued, sent, delivered, undelivered and failed come back there
            fields["StatusCallback"] = self.callback(message)
        return urlencode(fields).encode()

    def callback(self, message) -> str:
        """The StatusCallback URL naming the message's attempt (`?attempt=<intent>:<n>`): Twilio signs the
        URL with its query, so each report links to its attempt even before the send is settled."""
        return status_callback_url(self.status_callback or "", message.attempt_id)

    def send(self, message: SmsContent, deadline: float) -> SendResult:
        return forget(self._send(message, deadline), message.secret)  # the rendered secret, by value

    def _send(self, message, deadline: float) -> SendResult:
        headers = {
            "Authorization": self._authorization,
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
        }
        try:
            answer = self.client.post(self.url, deadline, body=self.form(message), headers=headers)
        except HttpFailure as failure:
            return failure.result
        error = _error(answer.body)
        if 200 <= answer.status < 300:
            return SendResult.accepted(str(error.get("sid") or "") or None)
        code = _int(error.get("code"))
        detail = (
            f"twilio {answer.status}{f' code {code}' if code else ''}: {scrub(str(error.get('message') or ''), 160)}"
        )
        wait = http_retry_after(answer.headers.get("Retry-After"))
        found_rule = self.find(code) if code is not None else None
        if found_rule is not None:
            found = Verdict.of(found_rule, table.PROVIDER, code)
            if not found.final:  # 21611: the sender's queue is full; never created: slow down, retry later
                return SendResult.retryable("rate_limited", detail, wait)
            return SendResult.refused(found, detail)
        if answer.status in (401, 403, 404):  # credentials, or a wrong TWILIO_API_URL or account
            return SendResult.configuration(detail, table.PROVIDER)
        if code == 20429 or answer.status == 429:  # "never processed": safe to retry
            return SendResult.retryable("rate_limited", detail, wait)
        if answer.status >= 500:
            return SendResult.ambiguous("provider_5xx", detail, retry_after=wait)
        return SendResult.refused(_unlisted(code, answer.status), detail)

    def close(self) -> None:
        self.client.close()


def status_callback_url(base: str, attempt_id: str) -> str:
    """`base` with the attempt in its query (api/delivery_reports.py reads it back once signed)."""
    return f"{base}{'&' if '?' in base else '?'}attempt={quote(attempt_id, safe=':')}"


def _unlisted(code: int | None, status: int) -> Verdict:
    return unexplained(table.PROVIDER, code if code is not None else status)


def _error(body: bytes) -> dict:
    try:
        parsed = json.loads(body or b"{}")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
