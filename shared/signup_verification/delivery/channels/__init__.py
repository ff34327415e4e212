"""Channel adapters: one per message channel (platform/channels.py's MESSAGE_CHANNELS), its transport
chosen by EMAIL_TRANSPORT, SMS_TRANSPORT, WHATSAPP_TRANSPORT and VOICE_TRANSPORT; the webhook channel
when WEBHOOK_URL is set."""

from __future__ import annotations

import dataclasses
import ssl
from collections.abc import Mapping

from ...platform.channels import EMAIL, MESSAGE_CHANNELS, SMS, VOICE, WHATSAPP
from ...platform.errors import ConfigError
from ..config import ChannelsConfig
from .base import CONFIGURATION, Channel, SendResult
from .console import ConsoleChannel, DisabledChannel

__all__ = ["Channel", "SendResult", "CONFIGURATION", "build_channels", "smtp_tls_context"]


def build_channels(config: ChannelsConfig, *, ssl_context: ssl.SSLContext | None = None) -> Mapping[str, Channel]:
    """{channel: adapter} for every message channel of this config. A transport whose credentials are
    missing raises ConfigError naming each (the dispatch target is refused at start, config/checks.py)."""
    missing = config.missing()
    if missing:
        raise ConfigError("; ".join(missing), tuple(missing))
    channels = {
        EMAIL: _email(config, ssl_context),
        SMS: _sms(config),
        WHATSAPP: _whatsapp(config),
        VOICE: _voice(config),
    }
    assert tuple(channels) == MESSAGE_CHANNELS  # nosec B101: one adapter per message channel
    if config.webhook.enabled:
        channels["webhook"] = _webhook(config)
    return channels


def _webhook(config: ChannelsConfig) -> Channel:
    from .http import HttpClient
    from .webhook import WebhookChannel

    client = HttpClient(timeout=config.send_timeout_seconds, pool_size=config.pool_size("webhook"))
    return WebhookChannel(config.webhook.url or "", config.webhook.secrets, client)


def _console(config: ChannelsConfig, channel: str) -> Channel:
    if config.production:
        return DisabledChannel(channel, f"{channel.upper()}_TRANSPORT=console is refused in production")
    return ConsoleChannel(channel, config.local_dir / "outbox")


def smtp_tls_context(config: ChannelsConfig) -> ssl.SSLContext | None:
    """The system trust store plus SMTP_CA_FILE (a private relay's CA), for SMTP only: SSL_CERT_FILE
    would replace the store of the HTTPS providers too."""
    if not config.smtp_ca_file:
        return None
    context = ssl.create_default_context()
    try:
        context.load_verify_locations(cafile=config.smtp_ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"SMTP_CA_FILE {config.smtp_ca_file!r} is not a readable PEM certificate: {type(exc).__name__}"
        ) from None
    return context


def _email(config: ChannelsConfig, ssl_context: ssl.SSLContext | None) -> Channel:
    if config.email_transport == "smtp":
        from .smtp import SmtpChannel

        ssl_context = ssl_context or smtp_tls_context(config)
        smtp = config.smtp if ssl_context is None else dataclasses.replace(config.smtp, ssl_context=ssl_context)
        return SmtpChannel(smtp)
    if config.email_transport == "sendgrid":
        from .http import HttpClient
        from .sendgrid import SendGridChannel

        return SendGridChannel(
            config.sendgrid.api_key or "",
            config.sendgrid.url,
            HttpClient(timeout=config.send_timeout_seconds, pool_size=config.pool_size("email")),
        )
    return _console(config, "email")


def _sms(config: ChannelsConfig) -> Channel:
    if config.sms_transport == "twilio":
        from .http import HttpClient
        from .twilio import TwilioChannel

        twilio = config.twilio
        return TwilioChannel(
            twilio.account_sid or "",
            twilio.auth_token or "",
            twilio.sender or "",
            twilio.api_url,
            HttpClient(timeout=config.send_timeout_seconds, pool_size=config.pool_size("sms")),
            status_callback=twilio.status_callback,  # delivery reports
        )
    return _console(config, "sms")


def _whatsapp(config: ChannelsConfig) -> Channel:
    if config.whatsapp_transport == "twilio":
        from .http import HttpClient
        from .twilio_whatsapp import TwilioWhatsAppChannel

        twilio = config.twilio
        return TwilioWhatsAppChannel(
            twilio.account_sid or "",
            twilio.auth_token or "",
            config.whatsapp.sender or "",
            twilio.api_url,
            HttpClient(timeout=config.send_timeout_seconds, pool_size=config.pool_size(WHATSAPP)),
            dict(config.whatsapp.content_sids or {}),
            status_callback=twilio.status_callback,
        )
    return _console(config, WHATSAPP)


def _voice(config: ChannelsConfig) -> Channel:
    if config.voice_transport == "twilio":
        from .http import HttpClient
        from .twilio_voice import TwilioVoiceChannel

        twilio = config.twilio
        return TwilioVoiceChannel(
            twilio.account_sid or "",
            twilio.auth_token or "",
            config.caller_id or "",
            twilio.api_url,
            HttpClient(timeout=config.send_timeout_seconds, pool_size=config.pool_size(VOICE)),
            status_callback=twilio.status_callback,
            ring_seconds=config.voice.ring_seconds,
            limit_seconds=config.voice.limit_seconds,
        )
    return _console(config, VOICE)
