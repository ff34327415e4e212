"""The contents of the two code channels beside SMS: a WhatsApp authentication template and a voice call.

WhatsApp: Meta accepts a one-time code from a business only in an approved *authentication*
template, whose text Meta fixes per language; Twilio names such a template by its content SID
(`HX...`), one per language. The message carries the SID of the intent's language and the code as
the template's only variable (`{"1": code}`); our template's `whatsapp` part is that text as Meta
shows it, which the local fake renders. No link: Meta's authentication templates allow none.

Voice: TwiML passed inline in the call request (no public TwiML URL to host or to leak): a `<Say>` in
the verification's language reading the template's `voice` part, where the code is spelled one digit
at a time with a pause between digits, and said twice. A speech engine reads it: no link, no symbols.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from html import escape

from ..platform.redaction import mask_destination
from . import templates

# Twilio <Say> languages per template language (a region the locale names wins when Twilio speaks it).
SPEECH_LANGUAGES = {"en": "en-US", "ja": "ja-JP"}
_REGIONS = frozenset({"en-AU", "en-CA", "en-GB", "en-IN", "en-US", "ja-JP"})
TWIML_LIMIT = 4000  # Twilio's Twiml parameter holds at most 4,000 characters


@dataclass(frozen=True, repr=False)
class WhatsAppContent:
    intent_id: int
    attempt_id: str
    to: str  # E.164; the adapter addresses it as whatsapp:+...
    locale: str
    text: str  # the approved template's text with the code (what the person reads; never sent by us)
    secret: str = ""  # the code: the template's variable
    channel = "whatsapp"

    def __repr__(self) -> str:
        return f"WhatsAppContent(intent={self.intent_id}, attempt={self.attempt_id!r}, to={mask_destination('sms', self.to)!r})"

    @property
    def variables(self) -> str:
        """Twilio's ContentVariables: the template's one variable, the code."""
        return json.dumps({"1": self.secret}, separators=(",", ":"))


@dataclass(frozen=True, repr=False)
class VoiceContent:
    intent_id: int
    attempt_id: str
    to: str
    locale: str
    speech: str  # what the call says
    secret: str = ""  # the code it speaks
    channel = "voice"

    def __repr__(self) -> str:
        return f"VoiceContent(intent={self.intent_id}, attempt={self.attempt_id!r}, to={mask_destination('sms', self.to)!r})"

    @property
    def language(self) -> str:
        return speech_language(self.locale)

    def twiml(self) -> str:
        """The call's TwiML: a short pause (the phone reaches the ear), then the text, in its language."""
        return (
            f'<?xml version="1.0" encoding="UTF-8"?><Response><Pause length="1"/>'
            f'<Say language="{escape(self.language)}">{escape(self.speech)}</Say></Response>'
        )


def speech_language(locale: str) -> str:
    if locale in _REGIONS:
        return locale
    return SPEECH_LANGUAGES.get(locale.split("-")[0].lower(), SPEECH_LANGUAGES[templates.DEFAULT_LOCALE])


def spelled(code: str) -> str:
    """The code one digit at a time, each followed by a pause a speech engine makes at a comma."""
    return ", ".join(code)


def _present(version_ref: str, locale: str, part: str) -> None:
    if not getattr(templates.load(version_ref, locale), part):
        raise templates.UnknownTemplate(f"template {version_ref} ({locale}) has no {part} text")


def whatsapp_text(version_ref: str, locale: str, code: str) -> str:
    _present(version_ref, locale, "whatsapp")
    return templates.render(version_ref, locale, "whatsapp", code=code).strip()


def voice_speech(version_ref: str, locale: str, *, product: str, minutes: int, code: str) -> str:
    _present(version_ref, locale, "voice")
    text = templates.render(version_ref, locale, "voice", product=product, minutes=minutes, digits=spelled(code))
    return " ".join(text.split())
