"""A voice call over Twilio's Calls API (POST /2010-04-01/Accounts/{sid}/Calls.json, form-encoded,
HTTP Basic as for SMS) that reads the code: the TwiML goes inline in the request (`Twiml`, at most
4,000 characters), so there is no public TwiML URL to host, to fetch or to leak the code from.

The request asks for answering machine detection in the background (`MachineDetection=Enable`,
`AsyncAmd=true`, its result to the status callback), a ring of at most `ring_seconds` and a call of
at most `limit_seconds` (which bounds the cost of one call). A refusal's code is classified by
delivery/classification/twilio_voice.py; the call's final status and its `AnsweredBy` by the same
table's `observed`. Landlines are callable: the SMS table's "not a mobile" never applies. Twilio has
no idempotency key on call create: an ambiguous answer may have placed the call.
"""

from __future__ import annotations

from urllib.parse import quote, urlencode

from ..classification import Category, Rule, ours
from ..classification import twilio_voice as table
from ..code_messages import TWIML_LIMIT, VoiceContent
from .base import SendResult, forget
from .http import HttpClient
from .twilio import TwilioChannel


class TwilioVoiceChannel(TwilioChannel):
    channel = "voice"

    def __init__(
        self,
        account_sid: str,
        auth_token: str,
        caller_id: str,
        api_url: str,
        client: HttpClient,
        status_callback: str | None = None,
        *,
        ring_seconds: int = 30,
        limit_seconds: int = 90,
    ):
        super().__init__(account_sid, auth_token, caller_id, api_url, client, status_callback)
        self.url = f"{api_url.rstrip('/')}/2010-04-01/Accounts/{quote(account_sid, safe='')}/Calls.json"
        self.ring_seconds = ring_seconds
        self.limit_seconds = limit_seconds

    def __repr__(self) -> str:
        return f"TwilioVoiceChannel({self.url!r})"

    @staticmethod
    def find(code: int) -> Rule | None:
        return table.ERRORS.get(code)

    def form(self, message) -> bytes:
        fields = {
            "To": message.to,
            "From": self.sender,  # a Twilio number or a verified caller ID: calls have no Messaging Service
            "Twiml": message.twiml(),
            "Timeout": str(self.ring_seconds),
            "TimeLimit": str(self.limit_seconds),
            "MachineDetection": "Enable",
            "AsyncAmd": "true",
        }
        if self.status_callback:  # `completed` (with busy, no-answer, failed, canceled) and the AMD result
            fields["StatusCallback"] = fields["AsyncAmdStatusCallback"] = self.callback(message)
        return urlencode(fields).encode()

    def send(self, message: VoiceContent, deadline: float) -> SendResult:  # type: ignore[override]
        if len(message.twiml()) > TWIML_LIMIT:  # a template or product name too long for Twilio
            return SendResult.refused(ours(Category.MESSAGE_REJECTED, table.PROVIDER), "TwiML past 4,000 characters")
        return forget(self._send(message, deadline), message.secret)
