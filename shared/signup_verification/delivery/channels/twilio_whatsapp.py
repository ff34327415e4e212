"""WhatsApp over Twilio's Messages API: the same endpoint, authentication and answers as an SMS
(channels/twilio.py), addressed `whatsapp:+<E.164>` from a WhatsApp sender (`whatsapp:+...`) or a
Messaging Service, and sending an approved authentication template by its content SID (one per
language, `content_sids`) with the code as its variable. A refusal's code is classified by
delivery/classification/twilio_whatsapp.py (the 63xxx codes, then the SMS table's).

Like an SMS, a WhatsApp message has no idempotency key: an ambiguous answer may have sent it.
"""

from __future__ import annotations

from urllib.parse import urlencode

from ..classification import Category, Rule, ours
from ..classification import twilio_whatsapp as table
from ..code_messages import WhatsAppContent
from .base import SendResult, forget
from .http import HttpClient
from .twilio import TwilioChannel

PREFIX = "whatsapp:"


class TwilioWhatsAppChannel(TwilioChannel):
    channel = "whatsapp"

    @staticmethod
    def find(code: int) -> Rule | None:
        return table.find(code)

    def __init__(
        self,
        account_sid: str,
        auth_token: str,
        sender: str,
        api_url: str,
        client: HttpClient,
        content_sids: dict[str, str],
        status_callback: str | None = None,
    ):
        super().__init__(account_sid, auth_token, sender, api_url, client, status_callback)
        self.content_sids = dict(content_sids)

    def __repr__(self) -> str:
        return f"TwilioWhatsAppChannel({self.url!r})"

    def content_sid(self, locale: str) -> str | None:
        """The approved template of this language: the locale's, else its language's."""
        return self.content_sids.get(locale) or self.content_sids.get(locale.split("-")[0].lower())

    def form(self, message) -> bytes:
        sid = self.content_sid(message.locale) or ""  # send() refuses a language without one first
        if self.sender.startswith("MG"):  # a Messaging Service holding the WhatsApp sender
            sender = ("MessagingServiceSid", self.sender)
        else:
            sender = ("From", self.sender if self.sender.startswith(PREFIX) else PREFIX + self.sender)
        fields = {"To": PREFIX + message.to, sender[0]: sender[1], "ContentSid": sid}
        fields["ContentVariables"] = message.variables
        if self.status_callback:  # queued, sent, delivered, read, undelivered and failed come back there
            fields["StatusCallback"] = self.callback(message)
        return urlencode(fields).encode()

    def send(self, message: WhatsAppContent, deadline: float) -> SendResult:  # type: ignore[override]
        if self.content_sid(message.locale) is None:  # one language's template missing: that language only
            detail = f"no WhatsApp template content SID for locale {message.locale!r}"
            return SendResult.refused(ours(Category.SENDER_MISCONFIGURED, table.PROVIDER), detail)
        return forget(self._send(message, deadline), message.secret)
