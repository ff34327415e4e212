"""The local mailbox's store (`verifyctl dev`): every email, SMS, WhatsApp message and call it was
handed (a call as the text it speaks), in memory.

A restart empties it, as a fresh laptop run should. Each message also carries what the emulated
provider reported about it (local/provider_reports.py): its delivery state.
"""

from __future__ import annotations

import email
import email.policy
import html.parser
import itertools
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import markupsafe

from ..delivery import sms
from ..platform.timestamps import rfc3339

MAX_MESSAGES = 1000
LABELS = {"email": "Email", "sms": "SMS", "whatsapp": "WhatsApp", "voice": "Call"}
_URL = re.compile(r"https?://[^\s<>\"')]+")
# A code as a text carries it (digits standing alone, never a port or a part of a longer number) and
# as a call speaks it (digit by digit: code_messages.py joins the digits with ", ").
_WRITTEN_CODE = re.compile(r"(?<![\d:])\d{4,10}(?!\d)")
_SPOKEN_CODE = re.compile(r"(?<![\d:])\d(?:, \d){3,9}(?!\d)")


@dataclass
class Message:
    id: int
    kind: str  # a message channel: email | sms | whatsapp | voice
    received_at: datetime
    sender: str
    recipients: list[str]
    subject: str
    text: str
    html: str | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)
    raw: bytes | None = None
    sid: str | None = None  # the fake Twilio message sid, or the SMTP queue id (the provider reference)
    status_callback: str | None = None  # SMS: the StatusCallback URL the create request carried
    # What the emulated provider last reported about it (provider_reports.py): None until it did.
    delivery: str | None = None
    delivery_note: str | None = None  # how the delivery_reports target answered, or why it did not

    @property
    def attempt_id(self) -> str | None:
        """Our X-Delivery-Attempt header (delivery/messages.py): what SendGrid's custom_args carry."""
        return next((v for k, v in self.headers if k.lower() == "x-delivery-attempt"), None)

    @property
    def links(self) -> list[str]:
        found = _URL.findall(self.text)
        if self.html:
            found += _hrefs(self.html)
        return list(dict.fromkeys(u for u in found if u.startswith(("http://", "https://"))))

    @property
    def label(self) -> str:
        """What the page calls it."""
        return LABELS.get(self.kind, self.kind)

    @property
    def code(self) -> str | None:
        """The code an SMS, a WhatsApp message or a call carries (the page shows it to copy), else None."""
        if self.kind == "voice":
            spoken = _SPOKEN_CODE.search(self.text)
            return spoken.group(0).replace(", ", "") if spoken else None
        written = _WRITTEN_CODE.search(self.text) if self.kind in ("sms", "whatsapp") else None
        return written.group(0) if written else None

    @property
    def preview(self) -> str:
        return self.subject if self.kind == "email" else self.text

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "received_at": rfc3339(self.received_at),
            "from": self.sender,
            "to": self.recipients,
            "subject": self.subject,
            "text": self.text,
            "html": self.html,
            "links": self.links,
            "sid": self.sid,
            "delivery": self.delivery,
            "delivery_note": self.delivery_note,
            "code": self.code,
        }


class Mailbox:
    """Thread-safe store shared by the SMTP handler, the Twilio endpoint and the web page."""

    def __init__(self) -> None:
        self._messages: list[Message] = []
        self._ids = itertools.count(1)
        self._changed = threading.Condition()

    def _add(self, build: Callable[[int], Message]) -> Message:
        with self._changed:
            message = build(next(self._ids))
            self._messages.append(message)
            del self._messages[:-MAX_MESSAGES]
            self._changed.notify_all()
        return message

    def add_email(self, raw: bytes, mail_from: str, rcpt_tos: list[str]) -> Message:
        parsed = email.message_from_bytes(raw, policy=email.policy.default)
        text_part = parsed.get_body(preferencelist=("plain",))
        html_part = parsed.get_body(preferencelist=("html",))
        return self._add(
            lambda i: Message(
                i,
                "email",
                datetime.now(UTC),
                str(parsed.get("From") or mail_from),
                list(rcpt_tos),
                str(parsed.get("Subject") or "(no subject)"),
                text_part.get_content() if text_part is not None else "",
                html_part.get_content() if html_part is not None else None,
                [(k, str(v)) for k, v in parsed.items()],
                raw,
                sid=secrets.token_hex(5).upper(),
            )
        )

    def add_sms(self, to: str, sender: str, body: str, status_callback: str | None = None) -> Message:
        sid = "SM" + secrets.token_hex(16)
        return self._add(
            lambda i: Message(
                i, "sms", datetime.now(UTC), sender, [to], "", body, sid=sid, status_callback=status_callback
            )
        )

    def add_whatsapp(self, to: str, sender: str, text: str, status_callback: str | None = None) -> Message:
        """A WhatsApp template message, as the person reads it (the template rendered with its variable)."""
        sid = "SM" + secrets.token_hex(16)
        return self._add(
            lambda i: Message(
                i, "whatsapp", datetime.now(UTC), sender, [to], "", text, sid=sid, status_callback=status_callback
            )
        )

    def add_call(self, to: str, caller: str, speech: str, status_callback: str | None = None) -> Message:
        """A call, as the text its TwiML's <Say> speaks."""
        sid = "CA" + secrets.token_hex(16)
        return self._add(
            lambda i: Message(
                i, "voice", datetime.now(UTC), caller, [to], "", speech, sid=sid, status_callback=status_callback
            )
        )

    def set_delivery(self, message_id: int, state: str, note: str | None) -> None:
        with self._changed:
            message = next((m for m in self._messages if m.id == message_id), None)
            if message is not None:
                message.delivery, message.delivery_note = state, note
            self._changed.notify_all()

    def messages(self) -> list[Message]:
        with self._changed:
            return list(reversed(self._messages))

    def get(self, message_id: int) -> Message | None:
        with self._changed:
            return next((m for m in self._messages if m.id == message_id), None)

    def clear(self) -> None:
        with self._changed:
            self._messages.clear()

    def wait_for(self, predicate: Callable[[Message], bool], timeout: float) -> Message | None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                match = next((m for m in reversed(self._messages) if predicate(m)), None)
                remaining = deadline - time.monotonic()
                if match is not None or remaining <= 0:
                    return match
                self._changed.wait(remaining)


class _Hrefs(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.found += [v for k, v in attrs if k == "href" and v]


def _hrefs(document: str) -> list[str]:
    parser = _Hrefs()
    parser.feed(document)
    return parser.found


def linkify(text: str) -> markupsafe.Markup:
    """Plain text, escaped, with its http(s) URLs as links."""
    out, last = [], 0
    for match in _URL.finditer(text):
        out.append(markupsafe.escape(text[last : match.start()]))
        url = markupsafe.escape(match.group(0))
        out.append(markupsafe.Markup(f'<a href="{url}">{url}</a>'))  # url is escaped above  # nosec B704
        last = match.end()
    out.append(markupsafe.escape(text[last:]))
    return markupsafe.Markup("").join(out)


def sms_segments(body: str) -> int:
    """Segments as carriers and Twilio count them: the dispatcher's own count (sms.py), never a second one."""
    return sms.encode_info(body).segments
