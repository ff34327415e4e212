"""The one timestamp format of every answer, event and operator output: RFC 3339, UTC, `Z`,
millisecond precision ('2026-12-01T21:23:32.123Z', what JavaScript's Date.toISOString() gives).
SQL writes the same with rfc3339() (sql/definitions/00_rfc3339.sql)."""

from __future__ import annotations

from datetime import UTC, datetime


def rfc3339(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def rfc3339_or_none(at: datetime | None) -> str | None:
    return None if at is None else rfc3339(at)
