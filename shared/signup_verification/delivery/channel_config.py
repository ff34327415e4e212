"""The channel adapters' settings (EMAIL_TRANSPORT, SMS_TRANSPORT, SMTP_*, SENDGRID_*, TWILIO_*,
SEND_*), apart from the adapters (channels/): config/ builds them on every target, which must not
load smtplib, the HTTP client or the renderer for it (issue 18). The adapters re-export their own."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .webhook_config import WebhookConfig

if TYPE_CHECKING:
    import ssl


@dataclass(frozen=True)
class SmtpConfig:
    host: str
    port: int
    security: str = "none"  # none | starttls | tls
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    timeout: float = 10.0
    helo_name: str = "localhost"  # given explicitly: smtplib's default does a reverse DNS lookup
    ssl_context: ssl.SSLContext | None = None


@dataclass(frozen=True)
class SendGridConfig:
    api_key: str | None = field(default=None, repr=False)  # SENDGRID_API_KEY
    url: str = "https://api.sendgrid.com/v3/mail/send"  # SENDGRID_API_URL


@dataclass(frozen=True)
class TwilioConfig:
    account_sid: str | None = None  # TWILIO_ACCOUNT_SID
    auth_token: str | None = field(default=None, repr=False)  # TWILIO_AUTH_TOKEN
    sender: str | None = None  # TWILIO_FROM
    api_url: str = "https://api.twilio.com"  # TWILIO_API_URL
    status_callback: str | None = None  # DELIVERY_REPORTS_URL + /twilio: Twilio posts status callbacks there


@dataclass(frozen=True)
class ChannelsConfig:
    email_transport: str = "console"  # EMAIL_TRANSPORT: smtp | sendgrid | console
    sms_transport: str = "console"  # SMS_TRANSPORT: twilio | console
    smtp: SmtpConfig = field(default_factory=lambda: SmtpConfig(host="localhost", port=8025))
    smtp_ca_file: str | None = None  # SMTP_CA_FILE: a private CA trusted for SMTP TLS, besides the system store
    sendgrid: SendGridConfig = field(default_factory=SendGridConfig)
    twilio: TwilioConfig = field(default_factory=TwilioConfig)
    send_timeout_seconds: float = 10.0  # SEND_TIMEOUT_SECONDS: per provider call
    send_concurrency: int = 8  # SEND_CONCURRENCY: the HTTP clients' pool size
    production: bool = False  # console transports are refused in production
    local_dir: Path = Path(".local")  # the console transport writes to local_dir / "outbox"
    webhook: WebhookConfig = field(default_factory=WebhookConfig)  # WEBHOOK_URL, WEBHOOK_SECRET (issue 12)
