"""Holds for operators: `verifyctl channel resume`, and the scope a hold names.

A hold has a scope (delivery/classification/): the whole channel (`sms`), held after a run of
account faults (outbox/config.py FailurePolicy), or one route of it (`sms:FR`, an SMS destination
country; `email:example.com`, an email receiving domain), held after route faults from several
destinations that make up a share of that route's sends. The claim takes none of a held channel's
intents, and leaves a held route's unsent, until the hold's time passes or an operator, having
fixed the cause, resumes that scope. Resuming also starts its fault count afresh.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from ..platform.catalogue import catalogue
from ..platform.channels import MESSAGE_CHANNELS, PHONE_CHANNELS
from ..platform.database import Database

_SQL = catalogue("delivery")
_CHANNEL_HOLDS_RESUME = _SQL["channel_holds_resume"]

_log = logging.getLogger("signup_verification.operations.channel_holds")
CHANNELS = MESSAGE_CHANNELS
_COUNTRY = re.compile(r"^[A-Za-z]{2}$")
_DOMAIN = re.compile(r"^[^@\s:/]{1,253}$")


@dataclass(frozen=True)
class HoldScope:
    channel: str
    route: str = ""  # '' for the whole channel; an ISO country (a phone channel) or a receiving domain (email)

    @property
    def scope(self) -> str:
        return "route" if self.route else "account"

    def __str__(self) -> str:
        return f"{self.channel}:{self.route}" if self.route else self.channel

    @classmethod
    def parse(cls, text: str) -> HoldScope:
        """`sms` (the whole channel), `sms:FR` (SMS to one country), `email:example.com` (one domain)."""
        channel, _, route = text.strip().partition(":")
        if channel not in CHANNELS:
            raise ValueError(f"a scope is CHANNEL or CHANNEL:ROUTE with CHANNEL one of {', '.join(CHANNELS)}")
        if not route:
            return cls(channel)
        if channel in PHONE_CHANNELS and not _COUNTRY.match(route):
            raise ValueError(f"a {channel} route is a destination country's two-letter ISO code, e.g. {channel}:FR")
        if channel == "email" and not _DOMAIN.match(route):
            raise ValueError("an email route is a receiving domain, e.g. email:example.com")
        return cls(channel, route.upper() if channel in PHONE_CHANNELS else route.lower())


def resume(db: Database, scope: HoldScope | str, resumed_by: str) -> bool:
    """Lift the hold of this scope (and forget its fault run); True when it was held."""
    held_scope = scope if isinstance(scope, HoldScope) else HoldScope.parse(scope)
    rows = db.run(_CHANNEL_HOLDS_RESUME, channel=held_scope.channel, route=held_scope.route)
    held = bool(rows and rows[0][0])
    _log.warning(
        "%s %s by %s",
        held_scope,
        "resumed" if held else "was not held; its fault count was reset",
        resumed_by,
        extra={
            "json_fields": {
                "event": "channel_resumed",
                "channel": held_scope.channel,
                "scope": held_scope.scope,
                "route": str(held_scope) if held_scope.route else None,
                "was_held": held,
                "by": resumed_by,
            }
        },
    )
    return held
