"""The suppression list for operators: `verifyctl suppression list|clear`.

Entries are keyed by the keyed digest of the exact destination (verifications/abuse.py
exact_email; older entries by the alias-folded one, `kind` alias), so the list never shows a
destination: `clear` takes the destination, normalises it as create does and derives both digests
under every key of the token ring, as create's check does: an entry written before a TOKEN_KEYS
rotation still blocks and is still cleared by destination (`clear --key HEX` removes one entry by
its key). Once the key it was written under leaves the ring it no longer matches: keep a retired
key in TOKEN_KEYS for as long as its suppressions should hold.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from ..platform.catalogue import catalogue
from ..platform.database import Database
from ..platform.timestamps import rfc3339, rfc3339_or_none

_SQL = catalogue("verifications")
_SUPPRESSION_LIST_ENTRIES = _SQL["suppression_list_entries"]
_SUPPRESSION_LIST_CLEAR = _SQL["suppression_list_clear"]
_SUPPRESSION_LIST_CLEAR_KEY = _SQL["suppression_list_clear_key"]

_log = logging.getLogger("signup_verification.operations.suppression_list")


@dataclass(frozen=True)
class Suppression:
    channel: str
    key: str  # the digest's hex, shortened in text output
    reason: str
    intent_id: int | None
    created_at: datetime
    expires_at: datetime | None
    kind: str  # exact | alias
    category: str | None

    def as_json(self) -> dict:
        return {
            "channel": self.channel,
            "key": self.key,
            "kind": self.kind,
            "category": self.category,
            "reason": self.reason,
            "intent_id": self.intent_id,
            "created_at": rfc3339(self.created_at),
            "expires_at": rfc3339_or_none(self.expires_at),
        }


def entries(db: Database, limit: int = 200) -> list[Suppression]:
    """Current entries (expired ones are not shown: they no longer block), newest first."""
    return [Suppression(**row) for row in db.rows(_SUPPRESSION_LIST_ENTRIES, limit=limit)]


def clear(db: Database, channel: str, key: bytes, cleared_by: str) -> bool:
    """Remove one entry; True when it existed. Logged with who cleared it (never the destination)."""
    removed = bool(db.run(_SUPPRESSION_LIST_CLEAR, channel=channel, key=key))
    return _logged(channel, key.hex(), removed, cleared_by)


class AmbiguousKey(ValueError):
    """A key prefix that more than one entry of the channel starts with."""


def clear_key(db: Database, channel: str, prefix: str, cleared_by: str) -> bool:
    """Remove the entry whose key starts with `prefix` (hex digits, as the list shows them); True
    when one was removed, AmbiguousKey when several start so (none is removed)."""
    row = db.rows(_SUPPRESSION_LIST_CLEAR_KEY, channel=channel, prefix=prefix.lower())[0]
    if row["matched"] > 1:
        raise AmbiguousKey(
            f"--key {prefix} starts {row['matched']} keys: give more of its digits (`--json` shows them whole)"
        )
    return _logged(channel, prefix, bool(row["removed"]), cleared_by)


def _logged(channel: str, key_hex: str, removed: bool, cleared_by: str) -> bool:
    _log.info("suppression %s", "cleared" if removed else "not found",
              extra={"json_fields": {"event": "suppression_clear", "channel": channel, "key": key_hex[:12].lower(),
                                     "cleared": removed, "by": cleared_by}})  # fmt: skip
    return removed


# An entry without an expiry (SUPPRESSION_DAYS unset or 0) blocks until `verifyctl suppression clear`.
UNTIL_CLEARED = "until cleared (no expiry)"


def render(found: list[Suppression]) -> str:
    """Every entry in force: create refuses its destination from `since` until `refused until`."""
    if not found:
        return "no destination is suppressed"
    lines = [
        f"{len(found)} destination(s) refused by create (422 destination-suppressed), newest first:",
        f"{'channel':<8} {'key':<14} {'since':<25} {'refused until':<25} reason",
    ]
    for s in found:
        until = rfc3339(s.expires_at) if s.expires_at else UNTIL_CLEARED
        lines.append(f"{s.channel:<8} {s.key[:12]:<14} {rfc3339(s.created_at):<25} {until:<25} {s.reason}")
    lines.append("`verifyctl suppression clear <destination>` (or `--key KEY --channel CHANNEL`) lifts one now")
    return "\n".join(lines)
