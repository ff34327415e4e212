"""Channel holds for operators: `verifyctl channel resume`, and what `status` says about them.

A channel is held after a run of sender or account faults (outbox/config.py): the claim
takes none of its intents until the hold's time passes or an operator, having fixed the cause,
resumes it. Resuming also starts the fault count afresh.
"""

from __future__ import annotations

import logging

from ..platform.database import Database, load_sql

_log = logging.getLogger("signup_verification.operations.channel_holds")
CHANNELS = ("email", "sms")


def resume(db: Database, channel: str, resumed_by: str) -> bool:
    """Lift the channel's hold (and forget its fault run); True when it was held."""
    if channel not in CHANNELS:
        raise ValueError(f"channel must be one of {', '.join(CHANNELS)}")
    rows = db.run(load_sql(__file__, "channel_holds_resume.sql"), channel=channel)
    held = bool(rows and rows[0][0])
    _log.warning(
        "channel %s %s by %s",
        channel,
        "resumed" if held else "was not held; its fault count was reset",
        resumed_by,
        extra={"json_fields": {"event": "channel_resumed", "channel": channel, "was_held": held, "by": resumed_by}},
    )
    return held
