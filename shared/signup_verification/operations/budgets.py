"""The operator's lever on the phone channels' hourly budgets: `verifyctl sms resume` (SMS and
WhatsApp, SMS_MAX_PER_HOUR) and `verifyctl voice resume` (calls, VOICE_MAX_PER_HOUR) grant the
current UTC hour another budget's worth, recorded with who asked. The budgets themselves are read by
the claim (outbox/functions/50_budgets.sql: sms_budget_left, voice_budget_left) and shown by the signals."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..platform.catalogue import catalogue
from ..platform.database import Database
from .config import SignalsConfig

_OUTBOX = catalogue("outbox")
_log = logging.getLogger("signup_verification.operations.budgets")


@dataclass(frozen=True)
class Budget:
    name: str  # what the command and the log call it
    setting: str  # the variable that sizes it
    statement: str  # outbox/queries/budgets.sql's grant
    parameter: str  # the grant's budget parameter


BUDGETS = {
    "sms": Budget("sms", "SMS_MAX_PER_HOUR", _OUTBOX["sms_grant"], "sms_max"),
    "voice": Budget("voice", "VOICE_MAX_PER_HOUR", _OUTBOX["voice_grant"], "voice_max"),
}


def resume(db: Database, config: SignalsConfig, name: str, granted_by: str) -> int:
    """Grant this UTC hour another budget's worth of `name` ('sms' or 'voice'); the sends now left."""
    budget = BUDGETS[name]
    per_hour = config.sms_max_per_hour if name == "sms" else config.voice_max_per_hour
    if per_hour is None:
        raise ValueError(f"{budget.setting} is not set: there is no {name} budget to resume")
    row = db.rows(budget.statement, extra=per_hour, granted_by=granted_by, **{budget.parameter: per_hour})[0]
    _log.warning(
        "%s budget resumed by %s: %d more this hour",
        name,
        granted_by,
        per_hour,
        extra={"json_fields": {"event": f"{name}_budget_resumed", "granted_by": granted_by}},
    )
    return int(row["budget_left"])
