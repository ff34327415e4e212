"""SMS over Twilio's Messages API (POST /2010-04-01/Accounts/{sid}/Messages.json, form-encoded,
HTTP Basic with the account SID and auth token).

Twilio has no idempotency key on message create, so an ambiguous SMS is held by default
(outbox/policy.py): a duplicate code reaches a phone. Error codes (docs/channels.md): 21211
invalid To, 21604 To missing, 21614 not a mobile number, 21635 landline, 21612 unreachable are
permanent for the intent; 21610 is an unsubscribed recipient (STOP); 21408 (region not enabled
for the To number), 21606/21659 (the From cannot reach that destination) and 21608 (trial
account, unverified number) fail that one message: `destination_not_permitted`, the channel goes
on. Only what fails every message stops the channel (`configuration`, alerting): credentials
(20003, HTTP 401/403), the account (20404, HTTP 404) and a missing or invalid sender (21603,
21212). 20429 / HTTP 429 "never processed" is retryable; 5xx ambiguous.
"""

from __future__ import annotations

import json
from base64 import b64encode
from urllib.parse import quote, urlencode

from ..channel_config import TwilioConfig  # noqa: F401  (moved: issue 18)
from ..messages import SmsContent
from .base import CONFIGURATION, SendResult, forget, http_retry_after, scrub
from .http import HttpClient, HttpFailure

PERMANENT = {
    21211: "invalid_destination",
    21604: "invalid_destination",
    21614: "not_mobile",
    21635: "landline",
    21612: "unreachable_destination",
    21610: "unsubscribed",
    21617: "message_too_long",
    # This destination, not every one: a region not enabled, a From that cannot reach that
    # country, a trial account's unverified number. One user's foreign number must not stop SMS.
    21408: "destination_not_permitted",
    21606: "destination_not_permitted",
    21659: "destination_not_permitted",
    21608: "destination_not_permitted",
}
CONFIGURATION_CODES = {20003, 20404, 21212, 21603}  # credentials, the account, the sender: every message fails


class TwilioChannel:
    channel = "sms"
    transport = "twilio"

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
        if self.status_callback:  # issue 13: queued/sent/delivered/undelivered/failed come back there
            fields["StatusCallback"] = self.status_callback
        return urlencode(fields).encode()

    def send(self, message: SmsContent, deadline: float) -> SendResult:
        return forget(self._send(message, deadline), message.secret)  # the rendered secret, by value

    def _send(self, message: SmsContent, deadline: float) -> SendResult:
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
        if code in PERMANENT:
            return SendResult.failed(PERMANENT[code], detail)
        if code in CONFIGURATION_CODES or answer.status in (401, 403):
            return SendResult.failed(CONFIGURATION, detail)
        if code == 20429 or answer.status == 429:  # "never processed": safe to retry
            return SendResult.retryable("rate_limited", detail, http_retry_after(answer.headers.get("Retry-After")))
        if answer.status >= 500:
            return SendResult.ambiguous("provider_5xx", detail)
        if answer.status == 404:
            return SendResult.failed(CONFIGURATION, detail)  # wrong TWILIO_API_URL or account
        return SendResult.failed("rejected", detail)

    def close(self) -> None:
        self.client.close()


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
