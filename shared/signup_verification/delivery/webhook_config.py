"""The webhook channel's settings: where the site's signed events go, the secrets that sign them, and
which event types the outbox records (README "Webhooks", docs/webhooks.md). Light on purpose, as
delivery/config.py: every target reads them at start.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from urllib.parse import urlparse

from ..platform.errors import ConfigError
from ..platform.settings import plain, setting

SECRET_PREFIX = "whsec_"  # the format's prefix, not a secret  # nosec B105
# What the outbox records: the verification's own events and delivery.failed by default; the
# per-delivery ones when the site asks for them (WEBHOOK_EVENTS). `verification.proved` is one of the
# verification's own (at most one per message channel): the only word a site gets of a proof after the
# first, so it is on unless a site leaves it out. `webhook.test` is sent by `verifyctl webhooks test`
# only, never recorded.
DEFAULT_EVENT_TYPES = (
    "verification.verified",
    "verification.proved",
    "verification.expired",
    "verification.locked",
    "delivery.failed",
)
EVENT_TYPES = (*DEFAULT_EVENT_TYPES, "delivery.delivered", "delivery.bounced")


def parse_events(raw: str) -> tuple[str, ...]:
    """'verification.verified,delivery.delivered' -> the types, in the documented order; a ConfigError
    names an unknown one. `all` asks for every type."""
    asked = {e.strip() for e in raw.split(",") if e.strip()}
    if asked == {"all"}:
        return EVENT_TYPES
    unknown = sorted(asked - set(EVENT_TYPES))
    if unknown:
        raise ConfigError(
            f"WEBHOOK_EVENTS names unknown event types: {', '.join(unknown)} (known: {', '.join(EVENT_TYPES)})"
        )
    if not asked:
        raise ConfigError("WEBHOOK_EVENTS names no event type")
    return tuple(e for e in EVENT_TYPES if e in asked)


def parse_secrets(raw: str) -> tuple[bytes, ...]:
    """'whsec_<base64>,whsec_<base64>' -> the HMAC keys; a ConfigError names the bad entry by position."""
    keys = []
    for position, entry in enumerate((e.strip() for e in raw.split(",")), start=1):
        if not entry:
            continue
        if not entry.startswith(SECRET_PREFIX):
            raise ConfigError(f"WEBHOOK_SECRET entry {position} must start with {SECRET_PREFIX}")
        try:
            key = base64.b64decode(entry[len(SECRET_PREFIX) :], validate=True)
        except (binascii.Error, ValueError):
            raise ConfigError(f"WEBHOOK_SECRET entry {position} is not valid base64 after {SECRET_PREFIX}") from None
        if len(key) < 24:
            raise ConfigError(f"WEBHOOK_SECRET entry {position} is too short (at least 24 bytes of key)")
        keys.append(key)
    if not keys:
        raise ConfigError("WEBHOOK_SECRET holds no secret")
    return tuple(keys)


def check_url(url: str, production: bool) -> str:
    """WEBHOOK_URL: absolute http(s); https in production (a signed body still must not travel in clear)."""
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ConfigError(f"WEBHOOK_URL must be an absolute http(s) URL, got {url!r}")
    if production and parsed.scheme != "https":
        raise ConfigError("WEBHOOK_URL must be https in production")
    if parsed.username or parsed.password:
        raise ConfigError("WEBHOOK_URL must not carry credentials (the signature authenticates us)")
    return url


@dataclass(frozen=True)
class WebhookConfig:
    url: str | None = setting(
        "WEBHOOK_URL",
        None,
        parse=lambda raw, env: check_url(raw, env.production),
        help="the signup site's endpoint for signed events (`verification.verified`, `.proved`, `.expired`, "
        "`.locked`, `delivery.failed`; docs/webhooks.md). Unset: webhooks off, no event is written. Set it on every function "
        "that changes a verification (confirm, dispatch, reconcile, delivery_reports); `https` in production",
    )
    secrets: tuple[bytes, ...] = setting(
        "WEBHOOK_SECRET",
        (),
        parse=plain(parse_secrets),
        secret=True,
        help="`whsec_<base64>`, comma-separated while rotating: each request carries one Standard Webhooks "
        "signature per secret; needed by dispatch",
    )
    max_attempts: int = setting(
        "WEBHOOK_MAX_ATTEMPTS",
        12,
        minimum=1,
        help="attempts per event (about 2.5 h of receiver outage with the default backoff)",
    )
    events: tuple[str, ...] = setting(
        "WEBHOOK_EVENTS",
        DEFAULT_EVENT_TYPES,
        parse=plain(parse_events),
        help="the event types the site wants, comma-separated (`all` for every type): add `delivery.delivered` "
        "and `delivery.bounced` for one event per delivery (docs/webhooks.md)",
    )

    @property
    def enabled(self) -> bool:
        return self.url is not None

    def session_settings(self) -> dict[str, str]:
        """What the database must know, sent in each connection's start-up packet (no round trip):
        record_event() writes events only when `signup_verification.webhooks` is 'on'."""
        if not self.enabled:
            return {}
        return {
            "signup_verification.webhooks": "on",
            "signup_verification.webhook_max_attempts": str(self.max_attempts),
            "signup_verification.webhook_events": ",".join(self.events),
        }
