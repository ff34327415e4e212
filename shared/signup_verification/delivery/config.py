"""The delivery worker's settings: what the messages say, the channels' transports and providers,
the sends in flight per channel (README "Dispatch"; each declared once,
platform/settings.py). The providers' rates and the fan-out are capacity_config.py's; the dispatch
run's own settings, operations/config.py's DispatchConfig.

Light on purpose: every target reads these at start, and none may load the renderer, the adapters,
smtplib or the HTTP client for it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parseaddr
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from ..platform.config import LOCAL_DIR, production_flag
from ..platform.settings import Env, Setting, each, part, plain, setting
from ..verifications.config import (
    CODE_DIGITS,
    PRODUCT_NAME,
    TWILIO_FROM,
    VERIFY_LINK_BASE,
    VOICE_TRANSPORT,
    WHATSAPP_TRANSPORT,
)
from .webhook_config import WebhookConfig

if TYPE_CHECKING:
    import ssl

SEND_TIMEOUT = Setting(
    "SEND_TIMEOUT_SECONDS", 10.0, above=0, help="per provider call (connect + answer), also capped by the deadline"
)
# The default carries docs/capacity.md's documented load (100 verifications/s at peak, 20 % SMS:
# 72,000 SMS an hour) with docs/deploy.md's ~1.3 headroom; infra's sms_max_per_hour has the same.
SMS_MAX_PER_HOUR = Setting(
    "SMS_MAX_PER_HOUR",
    94_000,
    minimum=1,
    help="global SMS budget per UTC hour: past it SMS sends pause (intents wait, none fails, email unaffected), "
    "`status --check` alerts; `verifyctl sms resume` grants another budget for this hour. The default carries "
    "the documented peak (docs/capacity.md); lower it to what your peak hour needs, to cap SMS pumping",
)
# A call costs several SMS (billed per minute; the ranges pumping reaches by calls cost more still): calls
# have their own budget, sized well below the SMS one.
VOICE_MAX_PER_HOUR = Setting(
    "VOICE_MAX_PER_HOUR",
    2_000,
    minimum=1,
    help="global call budget per UTC hour: past it calls pause (voice intents wait, none fails, other channels "
    "unaffected), `status --check` alerts; `verifyctl voice resume` grants another budget for this hour. WhatsApp "
    "messages count in `SMS_MAX_PER_HOUR`",
)
EMAIL_FROM = Setting(
    "EMAIL_FROM",
    "Signup <no-reply@localhost>",
    help="sender; its domain is the Message-ID domain and the SMTP HELO name; an `@localhost` sender is "
    "refused at start-up in production",
)
SMS_TRANSPORT = Setting("SMS_TRANSPORT", "console", choices=("twilio", "console"), help="`twilio` or `console`")
TWILIO_ACCOUNT_SID = Setting("TWILIO_ACCOUNT_SID", None, help="required with `SMS_TRANSPORT=twilio`")
TWILIO_AUTH_TOKEN = Setting(
    "TWILIO_AUTH_TOKEN",
    None,
    secret=True,
    help="required with `SMS_TRANSPORT=twilio`; also checks the signature of Twilio's status callbacks",
)
TWILIO_API_URL = Setting("TWILIO_API_URL", "https://api.twilio.com", help="Twilio's API (a stand-in's in tests)")


def _reports_url(raw: str, env: Env) -> str:
    if not raw.startswith(("https://", "http://")):
        raise ValueError(f"must be an http(s) URL, got {raw!r}")
    if env.production and not raw.startswith("https://"):  # the providers post (and Twilio signs) to it
        raise ValueError(f"must be https in production, got {raw!r}")
    try:
        _ = urlparse(raw).port  # Twilio's signature is checked with and without it (api/report_signatures.py)
    except ValueError:
        raise ValueError(f"has a port that is not a number, got {raw!r}") from None
    return raw


DELIVERY_REPORTS_URL = Setting(
    "DELIVERY_REPORTS_URL",
    None,
    parse=_reports_url,
    help="the `delivery_reports` target's public base URL, as the providers call it: SendGrid's Event Webhook "
    "posts to it, Twilio's status callbacks go to `<url>/twilio` (docs/deploy.md); unset: no reports expected",
)


def message_domain(email_from: str) -> str:
    address = parseaddr(email_from)[1]
    return address.rpartition("@")[2] or "localhost"


def twilio_status_callback(reports_url: str | None) -> str | None:
    """What Twilio requests carry as StatusCallback (delivery/channels/twilio.py)."""
    return f"{reports_url.rstrip('/')}/twilio" if reports_url else None


def _app_hash(raw: str, env: Env) -> str:
    if not re.fullmatch(r"[A-Za-z0-9+/]{11}", raw):
        raise ValueError("must be the 11-character app hash Android's SMS Retriever computes (base64: A-Z a-z 0-9 + /)")
    return raw


@dataclass(frozen=True)
class MessageConfig:
    product_name: str = PRODUCT_NAME.field()
    link_base: str = VERIFY_LINK_BASE.field()
    email_from: str = EMAIL_FROM.field()
    code_digits: int = CODE_DIGITS.field()
    sms_app_hash: str | None = setting(
        "SMS_APP_HASH",
        None,
        parse=_app_hash,
        help="your Android app's SMS Retriever hash (11 characters): every SMS then carries it on the line before "
        "its origin-bound code line, so the app reads the code without asking (docs/channels.md)",
    )

    @property
    def code_origin(self) -> str:
        """The host the SMS binds its code to: the confirm target's, where the hosted code-entry page is."""
        return urlparse(self.link_base).hostname or "localhost"

    def autofill(self, code: str) -> str:
        """How every SMS ends (its template's `autofill`): the app hash when set, then the origin-bound
        one-time code line (`@host #code`, WICG "Origin-bound one-time codes delivered via SMS"), last,
        as Safari's and Chrome's autofill and the WebOTP API require."""
        return "\n".join([*([self.sms_app_hash] if self.sms_app_hash else []), f"@{self.code_origin} #{code}"])


# -- sends in flight ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class SendLimit:
    """One channel's most provider calls in flight in one invocation: the dispatcher runs as many as
    a batch holds, up to it, and the channel's HTTP pool keeps that many connections."""

    max_in_flight: int = setting(
        "SEND_CONCURRENCY_MAX_{key}",
        32,
        minimum=1,
        aliases=("SEND_CONCURRENCY",),
        help="the most {key} provider calls in flight in one invocation (each batch runs as many as it holds, up "
        "to this and to what the provider's rate can use); `SEND_CONCURRENCY` sets every channel's (a per-channel "
        "variable wins). A send in flight costs ~0.1 MB (docs/benchmarks.md)",
    )


# 128 emails in flight at a 200 ms provider are up to 640 sends/s, more than one vCPU renders and
# posts (~300-400/s: bench/dispatch_bench.py), so the instance, not the setting, is the ceiling. SMS
# are paced to the sender's MPS long before 32 are in flight.
# WhatsApp shares the Messages API's pace with SMS; a call is placed at Twilio's calls per second (1
# by default), so a few calls in flight keep it busy.
SEND_LIMITS = {
    "email": SendLimit(128),
    "sms": SendLimit(32),
    "whatsapp": SendLimit(32),
    "voice": SendLimit(8),
    "webhook": SendLimit(32),
}


# -- the channels ----------------------------------------------------------------------------------
def _readable_file(raw: str, env: Env) -> str:
    if not Path(raw).is_file():
        raise ValueError(f"must name a readable file, got {raw!r}")
    return raw


@dataclass(frozen=True)
class SmtpConfig:
    host: str = setting("SMTP_HOST", "localhost", help="the SMTP server (`EMAIL_TRANSPORT=smtp`)")
    port: int = setting("SMTP_PORT", 8025, minimum=1, help="its port")
    security: str = setting(
        "SMTP_SECURITY",
        "none",
        choices=("none", "starttls", "tls"),
        help="`starttls` (upgrade, certificate verified) or `tls` (implicit TLS, e.g. port 465)",
    )
    username: str | None = setting("SMTP_USERNAME", None, help="AUTH PLAIN/LOGIN when set, with `SMTP_PASSWORD`")
    password: str | None = setting("SMTP_PASSWORD", None, secret=True, help="the SMTP AUTH password")
    timeout: float = SEND_TIMEOUT.field()
    # given explicitly: smtplib's default does a reverse DNS lookup
    helo_name: str = EMAIL_FROM.field(view=message_domain)
    ssl_context: ssl.SSLContext | None = None


@dataclass(frozen=True)
class SendGridConfig:
    api_key: str | None = setting(
        "SENDGRID_API_KEY", None, secret=True, help="required with `EMAIL_TRANSPORT=sendgrid`"
    )
    url: str = setting("SENDGRID_API_URL", "https://api.sendgrid.com/v3/mail/send", help="SendGrid's Mail Send API")


@dataclass(frozen=True)
class TwilioConfig:
    account_sid: str | None = TWILIO_ACCOUNT_SID.field()
    auth_token: str | None = TWILIO_AUTH_TOKEN.field()
    sender: str | None = TWILIO_FROM.field()
    api_url: str = TWILIO_API_URL.field()
    # Twilio posts status callbacks there (delivery reports)
    status_callback: str | None = DELIVERY_REPORTS_URL.field(view=twilio_status_callback)


def parse_content_sids(raw: str) -> dict[str, str]:
    """'en:HX...,ja:HX...' -> {language: content SID}; a ValueError names the bad entry by position."""
    sids: dict[str, str] = {}
    for position, entry in enumerate((e.strip() for e in raw.split(",")), start=1):
        if not entry:
            continue
        language, sep, sid = (part.strip() for part in entry.partition(":"))
        if not sep or not re.fullmatch(r"[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*", language):
            raise ValueError(f"entry {position} must look like en:HX<32 hex digits>")
        if not re.fullmatch(r"HX[0-9a-fA-F]{32}", sid):
            raise ValueError(f"entry {position} ({language}) must name a content SID HX<32 hex digits>")
        sids[language] = sid
    if not sids:
        raise ValueError("names no content SID")
    return sids


def _whatsapp_sender(raw: str, env: Env) -> str:
    number = raw.removeprefix("whatsapp:")
    if not (re.fullmatch(r"\+[1-9][0-9]{6,14}", number) or re.fullmatch(r"MG[0-9a-fA-F]{32}", raw)):
        raise ValueError(f"must be a WhatsApp sender whatsapp:+<E.164> or a Messaging Service SID MG…, got {raw!r}")
    return raw


def _caller_id(raw: str, env: Env) -> str:
    if not re.fullmatch(r"\+[1-9][0-9]{6,14}", raw):
        raise ValueError(f"must be an E.164 number (a Twilio number or a verified caller ID), got {raw!r}")
    return raw


TWILIO_WHATSAPP_FROM = Setting(
    "TWILIO_WHATSAPP_FROM",
    None,
    parse=_whatsapp_sender,
    help="required with `WHATSAPP_TRANSPORT=twilio`: the WhatsApp sender `whatsapp:+<E.164>` registered in "
    "Twilio, or a Messaging Service SID (`MG…`) holding it",
)
TWILIO_VOICE_FROM = Setting(
    "TWILIO_VOICE_FROM",
    None,
    parse=_caller_id,
    help="the number calls come from (a Twilio number or a verified caller ID, E.164); unset: `TWILIO_FROM` "
    "when that is a number. Required with `VOICE_TRANSPORT=twilio`",
)


@dataclass(frozen=True)
class WhatsAppConfig:
    """The WhatsApp channel over Twilio (delivery/channels/twilio_whatsapp.py): its sender and the
    approved authentication template of each language (docs/channels.md)."""

    sender: str | None = TWILIO_WHATSAPP_FROM.field()
    content_sids: Mapping[str, str] | None = setting(
        "TWILIO_WHATSAPP_CONTENT_SIDS",
        None,
        parse=plain(parse_content_sids),
        help="required with `WHATSAPP_TRANSPORT=twilio`: the approved WhatsApp authentication template of each "
        "language, `en:HX…,ja:HX…` (a locale without its own uses its language's; a language without one fails "
        "that message, `sender_misconfigured`)",
    )


@dataclass(frozen=True)
class VoiceConfig:
    """The voice channel over Twilio's Calls API (delivery/channels/twilio_voice.py)."""

    caller_id: str | None = TWILIO_VOICE_FROM.field()
    ring_seconds: int = setting(
        "VOICE_RING_SECONDS", 30, minimum=5, maximum=600, help="how long a call rings before it is `no-answer`"
    )
    limit_seconds: int = setting(
        "VOICE_TIME_LIMIT_SECONDS",
        90,
        minimum=30,
        maximum=600,
        help="the longest a call may last (what bounds one call's cost); the code is read twice well within it",
    )


EMAIL_TRANSPORT = Setting(
    "EMAIL_TRANSPORT",
    "console",
    choices=("smtp", "sendgrid", "console"),
    help="`smtp`, `sendgrid` or `console` (refused in production: sends fail as configuration errors)",
)


@dataclass(frozen=True)
class ChannelsConfig:
    email_transport: str = EMAIL_TRANSPORT.field()
    sms_transport: str = SMS_TRANSPORT.field()
    smtp: SmtpConfig = part(SmtpConfig)
    smtp_ca_file: str | None = setting(
        "SMTP_CA_FILE",
        None,
        parse=_readable_file,
        help="PEM file of a private CA trusted for the SMTP server, in addition to the system store (HTTPS "
        "providers keep the system store)",
    )
    sendgrid: SendGridConfig = part(SendGridConfig)
    twilio: TwilioConfig = part(TwilioConfig)
    whatsapp_transport: str = WHATSAPP_TRANSPORT.field()
    whatsapp: WhatsAppConfig = part(WhatsAppConfig)
    voice_transport: str = VOICE_TRANSPORT.field()
    voice: VoiceConfig = part(VoiceConfig)
    send_timeout_seconds: float = SEND_TIMEOUT.field()
    send_limits: Mapping[str, SendLimit] = each(SendLimit, SEND_LIMITS)  # each channel's HTTP pool size
    production: bool = production_flag()  # console transports are refused in production
    local_dir: Path = LOCAL_DIR.field()  # the console transport writes to local_dir / "outbox"
    webhook: WebhookConfig = part(WebhookConfig)

    @property
    def caller_id(self) -> str | None:
        """The number calls come from: TWILIO_VOICE_FROM, else TWILIO_FROM when it is a number (a
        Messaging Service places no calls)."""
        sender = self.twilio.sender
        return self.voice.caller_id or (sender if sender and sender.startswith("+") else None)

    def transport(self, channel: str) -> str:
        """The transport chosen for a message channel."""
        return {
            "email": self.email_transport,
            "sms": self.sms_transport,
            "whatsapp": self.whatsapp_transport,
            "voice": self.voice_transport,
        }[channel]

    def pool_size(self, channel: str) -> int:
        return self.send_limits[channel].max_in_flight

    def missing(self) -> list[str]:
        """What the chosen transports lack: the dispatch target refuses to start without it."""
        found = []
        if self.email_transport == "sendgrid" and not self.sendgrid.api_key:
            found.append("EMAIL_TRANSPORT=sendgrid needs SENDGRID_API_KEY")
        t = self.twilio
        credentials = (
            ("TWILIO_ACCOUNT_SID", t.account_sid),
            ("TWILIO_AUTH_TOKEN", t.auth_token),
            ("TWILIO_FROM", t.sender),
        )
        unset = [name for name, value in credentials if not value]
        if self.sms_transport == "twilio" and unset:
            found.append(f"SMS_TRANSPORT=twilio needs {', '.join(unset)}")
        account = [name for name, value in credentials[:2] if not value]
        if self.whatsapp_transport == "twilio":
            lacking = [
                *account,
                *(["TWILIO_WHATSAPP_FROM"] if not self.whatsapp.sender else []),
                *(["TWILIO_WHATSAPP_CONTENT_SIDS"] if not self.whatsapp.content_sids else []),
            ]
            if lacking:
                found.append(f"WHATSAPP_TRANSPORT=twilio needs {', '.join(lacking)}")
        if self.voice_transport == "twilio":
            lacking = [*account, *(["TWILIO_VOICE_FROM (or a TWILIO_FROM number)"] if not self.caller_id else [])]
            if lacking:
                found.append(f"VOICE_TRANSPORT=twilio needs {', '.join(lacking)}")
        if self.webhook.enabled and not self.webhook.secrets:
            found.append("WEBHOOK_URL needs WEBHOOK_SECRET")
        return found
