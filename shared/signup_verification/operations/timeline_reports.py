"""`verifyctl inspect`: the providers' delivery reports in the timeline, one event each.

Read from delivery_observations (append-only): what the provider said, when it said it (its own
timestamp, else when we received it), and which attempt it is about. Never a destination.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from ..platform.catalogue import catalogue
from ..platform.database import Database
from ..platform.timestamps import rfc3339

_SQL = catalogue("operations")
_TIMELINE_REPORTS = _SQL["timeline_reports"]


def events(db: Database, verification_id: uuid.UUID) -> list[tuple[datetime, str, str]]:
    """(at, kind, detail) for every report about the verification's message deliveries."""
    found = []
    for o in db.rows(_TIMELINE_REPORTS, verification_id=verification_id):
        said = (
            o["event"]
            + (f" ({o['detail']})" if o["detail"] else "")
            + (f" code {o['error_code']}" if o["error_code"] is not None else "")
        )
        effect = ": undeliverable, destination suppressed" if o["permanent"] else ""
        late = "" if o["provider_at"] is None else f", received {rfc3339(o['received_at'])}"
        found.append(
            (
                o["provider_at"] or o["received_at"],
                "reported",
                f"{o['provider']} says {said} for attempt {o['attempt_id']}{effect}{late}",
            )
        )
    return found
