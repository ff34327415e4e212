"""Rendering a claimed intent into the message its channel sends.

The token or code is derived here, at render time, from the intent's key id and nonce
(tokens.py), and exists only inside the rendered message: the message objects' reprs mask the
destination and never show content, and render errors carry no variable values.

Email: subject, text and HTML (autoescaped) from the intent's recorded template version and
locale; a stable Message-ID per intent (every attempt of one intent carries the same one, so a
mail client collapses a duplicate); `Auto-Submitted: auto-generated` (RFC 3834) so auto-responders
stay quiet. SMS: GSM-7 or UCS-2 with the segment count recorded on the attempt.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parseaddr

import jinja2

from ..outbox.transitions import BegunAttempt, ClaimedIntent
from ..platform.errors import ConfigError
from ..platform.redaction import mask_destination
from ..platform.timestamps import minutes_left
from ..verifications.tokens import LINK_PARAMETER, Keyring, page_url, with_verification_id
from . import code_messages, mime, sms, templates
from .classification import Category, Fault, Verdict, configuration, ours
from .config import MessageConfig, message_domain
from .events import EventContent, render_event

AUTO_HEADERS = (("Auto-Submitted", "auto-generated"), ("X-Auto-Response-Suppress", "All"))


# Past retention the destination is gone: the verification died long before. A template that fails
# to render fails that message, not the channel.
_REDACTED = Verdict(True, Fault.TRANSIENT_OR_UNKNOWN, Category.EXPIRED, None)
_TEMPLATE = ours(Category.MESSAGE_REJECTED)


class RenderError(Exception):
    """The intent cannot be rendered (unknown template, missing key): permanent for this intent."""

    def __init__(self, error_class: str, detail: str, verdict: Verdict):
        super().__init__(detail)
        self.error_class = error_class
        self.detail = detail
        self.verdict = verdict


@dataclass(frozen=True, repr=False)
class EmailContent:
    intent_id: int
    attempt_id: str
    to: str
    sender: str
    subject: str
    text: str
    html: str
    message_id: str
    headers: tuple[tuple[str, str], ...] = AUTO_HEADERS
    secret: str = ""  # the link token it carries: the adapter removes it from provider texts (forget)
    channel = "email"

    def __repr__(self) -> str:
        return f"EmailContent(intent={self.intent_id}, attempt={self.attempt_id!r}, to={mask_destination('email', self.to)!r})"

    @property
    def sender_address(self) -> str:
        return parseaddr(self.sender)[1]

    def mime(self) -> bytes:
        return mime.build(
            sender=self.sender,
            to=self.to,
            subject=self.subject,
            message_id=self.message_id,
            text=self.text,
            html=self.html,
            extra_headers=(*self.headers, ("X-Delivery-Attempt", self.attempt_id)),
        )


@dataclass(frozen=True, repr=False)
class SmsContent:
    intent_id: int
    attempt_id: str
    to: str
    body: str
    encoding: str
    segments: int
    max_segments: int
    secret: str = ""  # the code it carries: the adapter removes it from provider texts (forget)
    channel = "sms"

    def __repr__(self) -> str:
        return (
            f"SmsContent(intent={self.intent_id}, attempt={self.attempt_id!r}, "
            f"to={mask_destination('sms', self.to)!r}, {self.encoding}, segments={self.segments})"
        )


Content = EmailContent | SmsContent | code_messages.WhatsAppContent | code_messages.VoiceContent | EventContent


def render_part(
    version_ref: str, locale: str, part: str, *, product: str, minutes: int, secret_name: str, secret: str
) -> str:
    """One part of a message (~15 us: Jinja's render, next to a provider call of 100 ms or more)."""
    return templates.render(version_ref, locale, part, product=product, minutes=minutes, **{secret_name: secret})


# -- the renderer -----------------------------------------------------------------------------------


class Renderer:
    def __init__(self, config: MessageConfig, keyring: Keyring):
        self.config = config
        self.keyring = keyring
        self.domain = message_domain(config.email_from)

    def render(self, intent: ClaimedIntent, attempt: BegunAttempt, now: datetime | None = None) -> Content:
        if intent.is_event:  # a webhook event: no template, no token, no destination
            return render_event(intent, attempt)
        destination = intent.destination
        if destination is None:
            raise RenderError("redacted", "the destination was redacted", _REDACTED)
        now = now or datetime.now(UTC)
        try:
            key = self.keyring.get(intent.key_id)
            minutes = minutes_left(intent.expires_at, now)
            if intent.channel == "email":
                return self._email(intent, destination, attempt, key, minutes)
            if intent.channel in ("whatsapp", "voice"):
                return self._code_message(intent, destination, attempt, key, minutes)
            return self._sms(intent, destination, attempt, key, minutes)
        except ConfigError as exc:  # the message names the key id only
            raise RenderError("configuration", str(exc), configuration()) from None
        except templates.UnknownTemplate as exc:
            raise RenderError("template", str(exc), _TEMPLATE) from None
        except jinja2.TemplateError as exc:  # e.g. an undefined variable: names it, never a value
            raise RenderError(
                "template", f"{type(exc).__name__} in {intent.template_version}/{intent.locale}", _TEMPLATE
            ) from None

    def message_id(self, intent: ClaimedIntent) -> str:
        return f"<{intent.id}.{intent.verification_id}@{self.domain}>"

    def _email(self, intent: ClaimedIntent, destination: str, attempt: BegunAttempt, key, minutes: int) -> EmailContent:
        token = key.link_token(intent.verification_id, intent.token_nonce)
        # the link names its verification (found by primary key), then carries its token
        carried = with_verification_id(intent.verification_id, token)
        link = page_url(self.config.link_base, LINK_PARAMETER, carried)
        parts = {
            part: render_part(
                intent.template_version,
                intent.locale,
                part,
                product=self.config.product_name,
                minutes=minutes,
                secret_name="link",
                secret=link,
            )  # a variable name  # nosec B106
            for part in ("subject", "text", "html")
        }
        return EmailContent(
            intent.id,
            attempt.attempt_id,
            destination,
            self.config.email_from,
            parts["subject"].strip(),
            parts["text"],
            parts["html"],
            self.message_id(intent),
            headers=(*AUTO_HEADERS, ("Content-Language", intent.locale)),  # RFC 3282: the language it is in
            secret=token,
        )

    def _sms(self, intent: ClaimedIntent, destination: str, attempt: BegunAttempt, key, minutes: int) -> SmsContent:
        code = key.sms_code(intent.verification_id, intent.token_nonce, self.config.code_digits)
        body = sms.render_body(intent.template_version, intent.locale, self.config, minutes=minutes, code=code)
        info = sms.encode_info(body)
        template = templates.load(intent.template_version, intent.locale)
        return SmsContent(
            intent.id,
            attempt.attempt_id,
            destination,
            body,
            info.name,
            info.segments,
            template.sms_max_segments,
            secret=code,
        )

    def _code_message(
        self, intent: ClaimedIntent, destination: str, attempt: BegunAttempt, key, minutes: int
    ) -> code_messages.WhatsAppContent | code_messages.VoiceContent:
        """The other two code channels, each with its own code (tokens.py: which channel a proof came by)."""
        code = key.code(intent.channel, intent.verification_id, intent.token_nonce, self.config.code_digits)
        version, locale = intent.template_version, intent.locale
        if intent.channel == "whatsapp":
            text = code_messages.whatsapp_text(version, locale, code)
            return code_messages.WhatsAppContent(intent.id, attempt.attempt_id, destination, locale, text, secret=code)
        speech = code_messages.voice_speech(
            version, locale, product=self.config.product_name, minutes=minutes, code=code
        )
        return code_messages.VoiceContent(intent.id, attempt.attempt_id, destination, locale, speech, secret=code)


def sample_intent(
    channel: str,
    version_ref: str,
    locale: str,
    *,
    destination: str,
    key_id: str,
    expires_at: datetime,
    intent_id: int = 1,
) -> ClaimedIntent:
    """A ClaimedIntent for previews and template tests (no database)."""
    return ClaimedIntent(
        id=intent_id,
        verification_id=uuid.UUID(int=intent_id),
        channel=channel,
        locale=locale,
        template_version=version_ref,
        attempts=0,
        ambiguous_count=0,
        lease_version=1,
        lease_until=expires_at,
        created_at=expires_at,
        destination=destination,
        key_id=key_id,
        token_nonce=b"\x01" * 16,
        expires_at=expires_at,
        verification_status="pending",
    )
