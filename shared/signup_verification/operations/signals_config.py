"""The signals' thresholds (SIGNALS_WINDOW_SECONDS, READY_AGE_ALERT_SECONDS, ...), apart from the
signals (signals.py): config/ builds them on every target (issue 18)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SignalsConfig:
    window_seconds: float = 300.0  # SIGNALS_WINDOW_SECONDS: attempts by outcome over this window
    ready_age_alert_seconds: float = 120.0  # READY_AGE_ALERT_SECONDS: the page threshold (a fifth of the TTL)
    ttl_seconds: float = 600.0  # VERIFICATION_TTL_SECONDS: a backlog that drains slower expires unsent
    watermark_stale_seconds: float = 300.0  # RECONCILE_STALE_SECONDS: reconciler not advancing (infra alert too)
    sms_max_per_hour: int | None = 1000  # SMS_MAX_PER_HOUR: the global SMS budget (alert once spent)
    # ACCEPTED_UNDELIVERED_AGE_ALERT_SECONDS (issue 13): an accepted delivery without a delivered report
    # for longer pages; None (the default without DELIVERY_REPORTS_URL) = no reports expected, no alert
    awaiting_report_alert_seconds: float | None = None
