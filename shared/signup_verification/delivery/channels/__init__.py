"""Channel adapters: one per transport, chosen by EMAIL_TRANSPORT and SMS_TRANSPORT."""
from __future__ import annotations

import ssl
from typing import Mapping

from ..messages import message_domain
from ...platform.settings import ConfigError, Settings
from .base import CONFIGURATION, Channel, SendResult
from .console import ConsoleChannel, DisabledChannel

__all__ = ["Channel", "SendResult", "CONFIGURATION", "build_channels"]


def build_channels(settings: Settings, *, ssl_context: ssl.SSLContext | None = None) -> Mapping[str, Channel]:
    """{'email': adapter, 'sms': adapter} for these settings. A transport whose credentials are
    missing raises ConfigError (the dispatch answers 500 and logs it) rather than failing sends."""
    return {"email": _email(settings, ssl_context), "sms": _sms(settings)}


def _console(settings: Settings, channel: str) -> Channel:
    if settings.is_production:
        return DisabledChannel(channel, f"{channel.upper()}_TRANSPORT=console is refused in production")
    return ConsoleChannel(channel, settings.local_dir / "outbox")


def smtp_tls_context(settings: Settings) -> ssl.SSLContext | None:
    """The system trust store plus SMTP_CA_FILE (a private relay's CA), for SMTP only: SSL_CERT_FILE
    would replace the store of the HTTPS providers too."""
    if not settings.smtp_ca_file:
        return None
    context = ssl.create_default_context()
    try:
        context.load_verify_locations(cafile=settings.smtp_ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"SMTP_CA_FILE {settings.smtp_ca_file!r} is not a readable PEM certificate: {type(exc).__name__}") from None
    return context


def _email(settings: Settings, ssl_context: ssl.SSLContext | None) -> Channel:
    if settings.email_transport == "smtp":
        from .smtp import SmtpChannel, SmtpConfig

        ssl_context = ssl_context or smtp_tls_context(settings)
        return SmtpChannel(SmtpConfig(
            host=settings.smtp_host, port=settings.smtp_port, security=settings.smtp_security,
            username=settings.smtp_username, password=settings.smtp_password,
            timeout=settings.send_timeout_seconds, helo_name=message_domain(settings), ssl_context=ssl_context))
    if settings.email_transport == "sendgrid":
        from .http import HttpClient
        from .sendgrid import SendGridChannel

        if not settings.sendgrid_api_key:
            raise ConfigError("EMAIL_TRANSPORT=sendgrid needs SENDGRID_API_KEY")
        return SendGridChannel(settings.sendgrid_api_key, settings.sendgrid_api_url,
                               HttpClient(timeout=settings.send_timeout_seconds, pool_size=settings.send_concurrency))
    return _console(settings, "email")


def _sms(settings: Settings) -> Channel:
    if settings.sms_transport == "twilio":
        from .http import HttpClient
        from .twilio import TwilioChannel

        missing = [name for name, value in (("TWILIO_ACCOUNT_SID", settings.twilio_account_sid),
                                            ("TWILIO_AUTH_TOKEN", settings.twilio_auth_token),
                                            ("TWILIO_FROM", settings.twilio_from)) if not value]
        if missing:
            raise ConfigError(f"SMS_TRANSPORT=twilio needs {', '.join(missing)}")
        return TwilioChannel(settings.twilio_account_sid, settings.twilio_auth_token, settings.twilio_from,
                             settings.twilio_api_url, HttpClient(timeout=settings.send_timeout_seconds,
                                                                 pool_size=settings.send_concurrency))
    return _console(settings, "sms")
