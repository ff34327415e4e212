"""The one timestamp format of every answer, event and operator output: RFC 3339, UTC, `Z`,
millisecond precision ('2026-12-01T21:23:32.123Z', what JavaScript's Date.toISOString() gives).
SQL writes the same with rfc3339() (platform/functions/timestamps.sql).

And the one way a message (email, SMS) or a page tells a person how long is left: whole minutes,
rounded to the nearest (half a minute up), at least 1. A fresh 10-minute link says "10 minutes",
not 9 because a second passed before it was rendered; nothing says "0 minutes" (a link past its
end is never sent nor shown as working)."""

from __future__ import annotations

import math
from datetime import UTC, datetime


def rfc3339(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def rfc3339_or_none(at: datetime | None) -> str | None:
    return None if at is None else rfc3339(at)


def stated_minutes(seconds: float) -> int:
    """`seconds` left, as the minutes a person is told."""
    return max(1, math.floor(seconds / 60 + 0.5))


def minutes_left(expires_at: datetime, now: datetime) -> int:
    """The minutes a message or page states as left before `expires_at`."""
    return stated_minutes((expires_at - now).total_seconds())
