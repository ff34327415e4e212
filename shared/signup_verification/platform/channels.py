"""The channels, named once: every list of message channels in the code is one of these sets.

A verification's steps use the message channels: the email carries a link, every other message
channel a code (each channel its own code, tokens.py), and all of those are phone channels, reached
at an E.164 number through Twilio. The webhook channel carries the site's events, never a secret.
The database's CHECK constraints name the same channels (sql/schema.sql).
"""

from __future__ import annotations

from typing import Final

EMAIL: Final = "email"
SMS: Final = "sms"
WHATSAPP: Final = "whatsapp"
VOICE: Final = "voice"
WEBHOOK: Final = "webhook"

# What a verification's step (its channel or its fallback) may be.
MESSAGE_CHANNELS: Final = (EMAIL, SMS, WHATSAPP, VOICE)
# The message channels whose secret is a code the person types (the email's is a link).
CODE_CHANNELS: Final = (SMS, WHATSAPP, VOICE)
# The message channels addressed by a phone number (E.164): the same as the code channels.
PHONE_CHANNELS: Final = CODE_CHANNELS
# Every channel the outbox delivers on: the message channels and the site's events.
DELIVERY_CHANNELS: Final = (*MESSAGE_CHANNELS, WEBHOOK)
# The code channels whose number may be a landline: a call reaches one, a text does not.
LANDLINE_CHANNELS: Final = (VOICE,)


def is_code_channel(channel: str | None) -> bool:
    return channel in CODE_CHANNELS


def code_channels(*channels: str | None) -> tuple[str, ...]:
    """The code channels among a verification's channels (its primary, then its fallback), in order."""
    return tuple(c for c in channels if c in CODE_CHANNELS)
