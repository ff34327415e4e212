"""The signals as log records: one `event="signals"` record per channel, what Cloud Monitoring's
log-based metrics read (infra/metrics.tf, docs/runbook.md documents every field), and the reconciler's
`event="page"` digest.

    emit(db, deployment, source=...) signals.compute, then one structured log record per channel.
                                     The dispatcher calls it once per invocation, the reconciler too.
"""

from __future__ import annotations

import logging
from typing import Any

from ..platform.database import Database
from .config import SignalsConfig
from .signals import ChannelSignals, Signals, compute

_log = logging.getLogger("signup_verification.operations.signals")


def record_fields(signals: Signals, channel: ChannelSignals, source: str) -> dict[str, Any]:
    """The jsonPayload of one signals record (docs/runbook.md documents every field)."""
    fields: dict[str, Any] = {
        "event": "signals",
        "source": source,
        "deployment": signals.deployment,
        "channel": channel.channel,
        "oldest_ready_verification_seconds": channel.oldest_ready_verification_seconds,
        "ready_count": channel.ready_count,
        "scheduled_count": channel.scheduled_count,
        "claimed_count": channel.claimed_count,
        "attempting_count": channel.attempting_count,
        "expired_lease_count": channel.expired_lease_count,
        "ambiguous_count": channel.ambiguous_count,
        "oscillating_count": channel.oscillating_count,
        "attempts_window_seconds": signals.config.window_seconds,
        "last_claim_age_seconds": channel.last_claim_age_seconds,
        "reconciler_watermark_age_seconds": channel.reconciler_watermark_age_seconds,
        # infra/alerts.tf alerts on oldest_awaiting_report_seconds
        "awaiting_report_count": channel.awaiting_report_count,
        "oldest_awaiting_report_seconds": channel.oldest_awaiting_report_seconds,
        "delivery_latency_p50_seconds": channel.delivery_latency_p50_seconds,
        "delivery_latency_p95_seconds": channel.delivery_latency_p95_seconds,
        # a run of account faults holds the channel (scope account: infra/alerts.tf pages on channel_held);
        # route faults from several destinations hold one route (scope route: it warns on routes_held)
        "channel_held": channel.held,
        "sender_faults": (channel.sender_faults or {}).get("faults", 0),
        "routes_held": len(channel.held_routes),
        "held_routes": channel.held_routes,
        # the backlog against the link TTL, and a provider's slow-down (infra/alerts.tf pages on drain_seconds)
        "drain_seconds": channel.drain_seconds,
        "slowed_seconds": channel.slowed_seconds,
    }
    fields.update({f"attempts_{outcome}": n for outcome, n in channel.attempts.items()})
    fields.update({f"step{step}_{reason}": n for step, by in channel.later_steps.items() for reason, n in by.items()})
    if channel.channel == "sms":  # infra/metrics.tf counts records with sms_budget_paused = true, and at 80 %
        fields.update(
            sms_budget_left=signals.sms_budget_left,
            sms_budget_paused=signals.sms_paused,
            sms_budget_used_percent=signals.sms_budget_used_percent,
        )
    if channel.channel == "voice":
        fields.update(voice_budget_left=signals.voice_budget_left, voice_budget_paused=signals.voice_paused)
    return fields


def emit(
    db: Database,
    deployment: str,
    logger: logging.Logger | None = None,
    *,
    source: str = "dispatch",
    config: SignalsConfig | None = None,
    moved: bool = True,
) -> Signals:
    """Compute and log one `event="signals"` record per channel; returns what it logged.

    Its level: WARNING when the channel is late (an alert condition), INFO when the run that emits
    it (`source`) moved something and the channel has work, else DEBUG. A tick that moved nothing
    prints nothing in text below LOG_LEVEL=DEBUG, even while work waits (a fallback's timer, a
    retry's backoff); in JSON every record is written whatever its level (platform/logs.py).

    The reconciler's run (every minute, whatever else runs) also writes one `event="page"` record
    while any page's condition holds (`Signals.alerts()`, the thresholds the alert policies use):
    what infra's digest page matches (the small tier: one policy instead of one per page). Its absence
    is not news: when the reconciler stops, the absence page fires for it."""
    logger = logger or _log
    signals = compute(db, deployment, config)
    if source == "reconcile":
        _page(logger, signals)
    for channel in signals.channels:
        late = channel.oldest_ready_verification_seconds > signals.config.ready_age_alert_seconds
        late = late or (channel.channel == "sms" and signals.sms_paused) or channel.held or bool(channel.held_routes)
        late = late or (channel.drain_seconds or 0.0) > signals.config.ttl_seconds
        level = logging.WARNING if late else logging.INFO if moved and live(channel) else logging.DEBUG
        logger.log(
            level,
            "signals %s: %d ready (oldest %.0f s), %d ambiguous, %d oscillating",
            channel.channel,
            channel.ready_count,
            channel.oldest_ready_verification_seconds,
            channel.ambiguous_count,
            channel.oscillating_count,
            extra={"labels": {"channel": channel.channel}, "json_fields": record_fields(signals, channel, source)},
        )
    return signals


def _page(logger: logging.Logger, signals: Signals) -> None:
    alerts = signals.alerts()
    if alerts:
        logger.warning(
            "page: %s",
            "; ".join(alerts),
            extra={
                "json_fields": {
                    "event": "page",
                    "deployment": signals.deployment,
                    "alerts": alerts,
                    "summary": "; ".join(alerts)[:1000],
                }
            },
        )


def live(channel: ChannelSignals) -> bool:
    """Anything waiting, leased or ambiguous on this channel; an idle channel's record is DEBUG (still
    written in JSON, where the metrics count it: platform/logs.py)."""
    return any(
        (
            channel.ready_count,
            channel.scheduled_count,
            channel.claimed_count,
            channel.attempting_count,
            channel.expired_lease_count,
            channel.ambiguous_count,
            channel.oscillating_count,
        )
    )
