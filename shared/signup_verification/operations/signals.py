"""Operator signals: is ready work aging, is one channel isolated, are claims progressing, is
reconciliation advancing, which attempts are ambiguous.

    compute(db, deployment)        the numbers, per channel (operations/queries/signals.sql:signals: one statement, one round trip)
    workers(db)                    the heartbeat rows (verifyctl status, the status target)

signal_records.py writes them as the log records Cloud Monitoring's log-based metrics read.

`oldest_ready_verification_seconds` is the time the oldest *eligible* intent has waited since it
became eligible (next_attempt_at: its creation, or the end of its back-off). Eligibility is the
claim's own view, so an intent scheduled in the future or suppressed never ages it; 0 when nothing
is eligible, so the metric clears. `drain_seconds` is how long the ready backlog takes at the rate
sends began over the window: longer than the link TTL means links will expire unsent.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from ..outbox import heartbeats
from ..outbox.states import AttemptOutcome
from ..platform.catalogue import catalogue
from ..platform.channels import DELIVERY_CHANNELS
from ..platform.database import Database
from ..platform.timestamps import rfc3339, rfc3339_or_none
from .config import SignalsConfig

_OPERATIONS = catalogue("operations")
_OUTBOX = catalogue("outbox")
_SIGNALS = _OPERATIONS["signals"]

__all__ = ["ChannelSignals", "Signals", "compute", "workers"]

# Attempt-log rows by outcome in the window, and 'delivered': deliveries the provider reported
# delivered in the window (a report, not an attempt-log row).
ATTEMPT_OUTCOMES = (*(o.value for o in AttemptOutcome), "delivered")
# A verification's later steps (2: the fallback, 3) whose sending began in the window, by step and by
# why they became due: their timer passed, the step before failed for good (brought forward), or
# policy both sent them at once; and those suppressed in the window, never sent.
LATER_STEPS = ("2", "3")
LATER_STEP_REASONS = ("timer", "brought_forward", "at_once", "suppressed")
SMS_BUDGET_WARN = 0.8  # the share of SMS_MAX_PER_HOUR spent at which status warns (and infra pages)


@dataclass(frozen=True)
class ChannelSignals:
    channel: str
    ready_count: int
    oldest_ready_verification_seconds: float
    scheduled_count: int  # waiting for their next_attempt_at: not ready, not aging
    claimed_count: int
    attempting_count: int
    expired_lease_count: int  # leases the reconciler has not handled yet
    ambiguous_count: int
    oscillating_count: int  # live intents that were ambiguous twice or more
    attempts: dict[str, int]  # attempt-log rows in the window, by outcome ('attempting' = begun)
    last_claim_age_seconds: float | None
    reconciler_watermark_age_seconds: float | None
    # {step: {reason: n}} of LATER_STEPS and LATER_STEP_REASONS over the window
    later_steps: dict[str, dict[str, int]] = field(default_factory=dict)
    # accepted (in the last day) but not reported delivered, and accepted->delivered latency
    awaiting_report_count: int = 0
    oldest_awaiting_report_seconds: float = 0.0
    delivery_latency_p50_seconds: float | None = None
    delivery_latency_p95_seconds: float | None = None
    # the channel's run of account faults (scope account; held_until set while held), when recent or held
    sender_faults: dict[str, Any] | None = None
    # runs of route faults (scope route: one SMS destination country, one email receiving domain),
    # held or recent: [{route: 'sms:FR', held_until, faults, sends, destinations, accounts, reason, ...}]
    route_holds: list[dict[str, Any]] = field(default_factory=list)
    slowed_seconds: float = 0.0  # a provider's 429 keeps the claim off the channel this much longer
    # the ready backlog at the rate sends began over the window: 0 when nothing is ready, None when
    # something is but nothing began (no rate to measure: stalled, held, or just started)
    drain_seconds: float | None = 0.0

    @property
    def held(self) -> bool:
        """The whole channel is held (account faults)."""
        return bool(self.sender_faults and self.sender_faults.get("held_until"))

    @property
    def held_routes(self) -> list[str]:
        """The routes of the channel held now ('sms:FR', 'email:example.com')."""
        return [run["route"] for run in self.route_holds if run.get("held_until")]


@dataclass(frozen=True)
class Signals:
    deployment: str
    measured_at: datetime
    config: SignalsConfig
    channels: list[ChannelSignals]
    last_claim_at: datetime | None = None
    reconciler_watermark: datetime | None = None
    workers: list[dict[str, Any]] = field(default_factory=list)
    sms_budget_left: int | None = None  # None: no budget configured
    sms_budget_resets_at: datetime | None = None
    wrong_codes_last_day: int = 0  # SMS codes typed wrong in 24 h (CODE_FAILURES_PER_DESTINATION_PER_DAY)
    sms_budget_granted: int = 0  # `verifyctl sms resume` grants this hour
    fanout_live: int = 0  # dispatch invocations the fan-out started that may be running (delivery/fanout.py)
    voice_budget_left: int | None = None  # the call budget (VOICE_MAX_PER_HOUR); None: none configured
    voice_budget_granted: int = 0  # `verifyctl voice resume` grants this hour

    @property
    def sms_paused(self) -> bool:
        return self.sms_budget_left == 0

    @property
    def voice_paused(self) -> bool:
        return self.voice_budget_left == 0

    @property
    def sms_budget_total(self) -> int | None:
        """This hour's budget: SMS_MAX_PER_HOUR plus what an operator granted."""
        limit = self.config.sms_max_per_hour
        return None if limit is None else limit + self.sms_budget_granted

    @property
    def sms_budget_used(self) -> int | None:
        total, left = self.sms_budget_total, self.sms_budget_left
        return None if total is None or left is None else total - left

    @property
    def sms_budget_used_percent(self) -> float | None:
        total, used = self.sms_budget_total, self.sms_budget_used
        return None if not total or used is None else round(100.0 * used / total, 1)

    def channel(self, name: str) -> ChannelSignals:
        return next(c for c in self.channels if c.channel == name)

    def alerts(self) -> list[str]:
        """What a page would say right now (the same thresholds the alert policies use)."""
        found = []
        for c in self.channels:
            if c.oldest_ready_verification_seconds > self.config.ready_age_alert_seconds:
                found.append(
                    f"{c.channel}: oldest ready verification waited {c.oldest_ready_verification_seconds:.0f} s "
                    f"(> {self.config.ready_age_alert_seconds:g} s)"
                )
            if c.oscillating_count:
                found.append(f"{c.channel}: {c.oscillating_count} delivery(ies) ambiguous twice or more")
            limit = self.config.awaiting_report_alert_seconds
            if limit is not None and c.oldest_awaiting_report_seconds > limit:
                found.append(
                    f"{c.channel}: {c.awaiting_report_count} accepted delivery(ies) without a delivered report, "
                    f"oldest {c.oldest_awaiting_report_seconds:.0f} s (> {limit:g} s; provider reports arriving?)"
                )
            if c.sender_faults:
                found.append(_sender_fault_alert(c.channel, c.sender_faults, c.held))
            found += [_route_hold_alert(run) for run in c.route_holds if run.get("held_until")]
            if c.drain_seconds is not None and c.drain_seconds > self.config.ttl_seconds:
                found.append(
                    f"{c.channel}: {c.ready_count} ready drain in ~{c.drain_seconds / 60:.0f} min at the measured "
                    f"rate, longer than a link lives ({self.config.ttl_seconds / 60:g} min): links will expire "
                    "unsent (docs/runbook.md, Backlog against the TTL)"
                )
        resets = rfc3339(self.sms_budget_resets_at) if self.sms_budget_resets_at else "the next hour"
        percent = self.sms_budget_used_percent
        if self.sms_paused:
            found.append(
                f"sms: budget of {self.config.sms_max_per_hour} per hour spent: SMS sends paused until "
                f"{resets} or `verifyctl sms resume` (SMS pumping? docs/deploy.md)"
            )
        elif percent is not None and percent >= 100 * SMS_BUDGET_WARN:
            found.append(
                f"sms: {percent:.0f} % of this hour's budget ({self.sms_budget_used} of {self.sms_budget_total}) "
                f"used; SMS sends pause when it is spent, until {resets} (docs/deploy.md, sizing SMS_MAX_PER_HOUR)"
            )
        if self.voice_paused:
            found.append(
                f"voice: budget of {self.config.voice_max_per_hour} calls per hour spent: calls paused until "
                f"{resets} or `verifyctl voice resume` (toll fraud? docs/deploy.md)"
            )
        age = self.channels[0].reconciler_watermark_age_seconds if self.channels else None
        if age is None:
            found.append("reconciler: no completed sweep recorded for this deployment")
        elif age > self.config.watermark_stale_seconds:
            found.append(f"reconciler: watermark {age:.0f} s old (> {self.config.watermark_stale_seconds:g} s)")
        return found

    def as_json(self) -> dict[str, Any]:
        return {
            "deployment": self.deployment,
            "measured_at": rfc3339(self.measured_at),
            "window_seconds": self.config.window_seconds,
            "thresholds": {
                "ready_age_alert_seconds": self.config.ready_age_alert_seconds,
                "watermark_stale_seconds": self.config.watermark_stale_seconds,
            },
            "last_claim_at": rfc3339_or_none(self.last_claim_at),
            "reconciler_watermark": rfc3339_or_none(self.reconciler_watermark),
            "channels": {c.channel: {k: v for k, v in asdict(c).items() if k != "channel"} for c in self.channels},
            "sms_budget": {
                "max_per_hour": self.config.sms_max_per_hour,
                "granted": self.sms_budget_granted,
                "used": self.sms_budget_used,
                "used_percent": self.sms_budget_used_percent,
                "left": self.sms_budget_left,
                "paused": self.sms_paused,
                "resets_at": rfc3339_or_none(self.sms_budget_resets_at),
            },
            "voice_budget": {
                "max_per_hour": self.config.voice_max_per_hour,
                "granted": self.voice_budget_granted,
                "left": self.voice_budget_left,
                "paused": self.voice_paused,
            },
            "wrong_codes_last_day": self.wrong_codes_last_day,
            "fanout_live": self.fanout_live,
            "alerts": self.alerts(),
            "workers": self.workers,
        }


def compute(
    db: Database, deployment: str, config: SignalsConfig | None = None, *, with_workers: bool = False
) -> Signals:
    config = config or SignalsConfig()
    rows = db.rows(
        _SIGNALS,
        deployment=deployment,
        window_seconds=config.window_seconds,
        sms_max=config.sms_max_per_hour,
        voice_max=config.voice_max_per_hour,
        channels=list(DELIVERY_CHANNELS),
    )
    channels = []
    for row in rows:
        attempts = {outcome: 0 for outcome in ATTEMPT_OUTCOMES}
        attempts.update({k: int(v) for k, v in (row["attempts"] or {}).items()})
        later_steps = _later_steps(row["later_steps"] or {})
        channels.append(
            ChannelSignals(
                channel=row["channel"],
                ready_count=row["ready_count"],
                oldest_ready_verification_seconds=round(row["oldest_ready_verification_seconds"], 3),
                scheduled_count=row["scheduled_count"],
                claimed_count=row["claimed_count"],
                attempting_count=row["attempting_count"],
                expired_lease_count=row["expired_lease_count"],
                ambiguous_count=row["ambiguous_count"],
                oscillating_count=row["oscillating_count"],
                attempts=attempts,
                last_claim_age_seconds=_rounded(row["last_claim_age_seconds"]),
                reconciler_watermark_age_seconds=_rounded(row["reconciler_watermark_age_seconds"]),
                later_steps=later_steps,
                awaiting_report_count=row["awaiting_report_count"],
                oldest_awaiting_report_seconds=round(row["oldest_awaiting_report_seconds"], 3),
                delivery_latency_p50_seconds=_rounded(row["delivery_latency_p50_seconds"]),
                delivery_latency_p95_seconds=_rounded(row["delivery_latency_p95_seconds"]),
                sender_faults=row["sender_faults"],
                route_holds=list(row["route_holds"] or []),
                slowed_seconds=round(row["slowed_seconds"], 3),
                drain_seconds=drain_seconds(
                    row["ready_count"], attempts[AttemptOutcome.ATTEMPTING], config.window_seconds
                ),
            )
        )
    first = rows[0]
    return Signals(
        deployment,
        first["measured_at"],
        config,
        channels,
        first["last_claim_at"],
        first["reconciler_watermark"],
        workers(db) if with_workers else [],
        first["sms_budget_left"],
        first["sms_budget_resets_at"],
        first["wrong_codes_last_day"],
        first["sms_budget_granted"],
        first["fanout_live"],
        first["voice_budget_left"],
        first["voice_budget_granted"],
    )


def drain_seconds(ready: int, begun_in_window: int, window_seconds: float) -> float | None:
    """The ready backlog at the rate sends began over the window (None: nothing began to measure)."""
    if ready <= 0:
        return 0.0
    if begun_in_window <= 0:
        return None
    return round(ready * window_seconds / begun_in_window, 1)


def workers(db: Database) -> list[dict[str, Any]]:
    """Every heartbeat row (dispatch and reconcile of every deployment sharing this database)."""
    rows = heartbeats.rows(db)
    out = []
    for row in rows:
        item = {k: (rfc3339(v) if isinstance(v, datetime) else v) for k, v in row.items()}
        for key in ("completed_age_seconds", "claim_age_seconds"):
            value = item[key]
            item[key] = _rounded(float(value)) if value is not None else None
        out.append(item)
    return out


def _cause(run: dict[str, Any]) -> str:
    reason = run.get("reason") or {}
    return " ".join(str(p) for p in (reason.get("category"), reason.get("provider"), reason.get("code")) if p)


def _sender_fault_alert(channel: str, run: dict[str, Any], held: bool) -> str:
    if held:
        return (
            f"{channel}: held (scope account) after {run['faults']} fault(s) of our account ({_cause(run)}) since "
            f"{run['since']}: sends stopped until {run['held_until']}; fix it, then `verifyctl channel resume {channel}`"
        )
    return (
        f"{channel}: {run['faults']} fault(s) of our account ({_cause(run)}), the last at "
        f"{run['last_fault_at']}: no destination was suppressed (docs/runbook.md)"
    )


def _route_hold_alert(run: dict[str, Any]) -> str:
    route = run["route"]
    return (
        f"{route}: route held (scope route) after {run['faults']} fault(s) of our sender towards it ({_cause(run)}) "
        f"from at least {run['destinations']} destinations since {run['since']}: its sends wait until "
        f"{run['held_until']}, the rest of the channel sends; fix it, then "
        f"`verifyctl channel resume {route}`"
    )


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _later_steps(by_step: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """Every later step and reason, zero where the window had none (a record's fields stay the same)."""
    return {
        step: {reason: int((by_step.get(step) or {}).get(reason, 0)) for reason in LATER_STEP_REASONS}
        for step in LATER_STEPS
    }
