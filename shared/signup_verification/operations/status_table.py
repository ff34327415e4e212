"""`verifyctl status`: the operator signals as a table a person reads in a terminal.

The same numbers as the `status` target's JSON and the `signals` log records (signals.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..outbox.states import AttemptOutcome
from ..platform.timestamps import rfc3339
from .signals import Signals

# The attempt-log counts a row shows ('attempting': the attempts begun in the window).
_ATTEMPTS_SHOWN = (
    AttemptOutcome.ATTEMPTING,
    AttemptOutcome.ACCEPTED,
    AttemptOutcome.RETRYABLE,
    AttemptOutcome.AMBIGUOUS,
    AttemptOutcome.FAILED,
)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """Left-aligned first column, right-aligned numbers, two spaces between columns."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    out = []
    for r in cells:
        out.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
            ).rstrip()
        )
    return out


def render(s: Signals) -> str:
    window = f"{s.config.window_seconds / 60:g} min"
    lines = [
        f"deployment {s.deployment}   measured {rfc3339(s.measured_at)}   "
        f"page when oldest ready > {s.config.ready_age_alert_seconds:g} s",
        "",
    ]
    lines += table(
        [
            "channel",
            "ready",
            "oldest ready",
            "scheduled",
            "claimed",
            "attempting",
            "expired leases",
            "ambiguous",
            "oscillating",
            f"begun/accepted/retryable/ambiguous/failed ({window})",
            "drains in",
        ],
        [
            [
                c.channel,
                c.ready_count,
                _age(c.oldest_ready_verification_seconds),
                c.scheduled_count,
                c.claimed_count,
                c.attempting_count,
                c.expired_lease_count,
                c.ambiguous_count,
                c.oscillating_count,
                "/".join(str(c.attempts[k]) for k in _ATTEMPTS_SHOWN),
                _drain(c.drain_seconds, c.ready_count, s.config.ttl_seconds),
            ]
            for c in s.channels
        ],
    )
    lines += _delivery_limits(s)
    lines += _holds(s)
    # only when a channel policy sent or suppressed a later step in the window
    for c in s.channels:
        steps = [
            f"step {step} sent {f['timer'] + f['brought_forward'] + f['at_once']} (timer {f['timer']}, "
            f"brought forward {f['brought_forward']}, at once {f['at_once']}), suppressed {f['suppressed']}"
            for step, f in c.later_steps.items()
            if any(f.values())
        ]
        if steps:
            lines.append(f"later steps on {c.channel} ({window}): " + "; ".join(steps))
    first = s.channels[0] if s.channels else None
    claim = first.last_claim_age_seconds if first else None
    mark = first.reconciler_watermark_age_seconds if first else None
    dispatch = next((w for w in s.workers if w["name"] == f"dispatch:{s.deployment}"), None)
    completed = dispatch["completed_age_seconds"] if dispatch else None
    lines += [
        "",
        f"last dispatch run ({s.deployment}): "
        + ("none completed" if completed is None else f"completed {_age(completed)} ago"),
        f"last claim ({s.deployment}): " + ("never" if claim is None else f"{_age(claim)} ago"),
        f"reconciler watermark ({s.deployment}): " + ("no completed run" if mark is None else f"{_age(mark)} old"),
    ]
    if s.workers:
        lines += ["", "workers"]
        lines += table(
            ["name", "last completed", "last claim", "backlog"],
            [
                [
                    w["name"],
                    _ago(w["completed_age_seconds"]),
                    _ago(w["claim_age_seconds"]),
                    ", ".join((w.get("watermark") or {}).get("backlog") or []) or "-",
                ]
                for w in s.workers
            ],
        )
    alerts = s.alerts()
    lines += ["", "alerts: none" if not alerts else "ALERTS"] + [f"  - {a}" for a in alerts]
    return "\n".join(lines)


def _drain(seconds: float | None, ready: int, ttl: float) -> str:
    """The ready backlog at the measured rate, flagged when links would expire before it drains."""
    if not ready:
        return "-"
    if seconds is None:
        return "no sends in window"
    return _age(seconds) + (" > TTL" if seconds > ttl else "")


def _delivery_limits(s: Signals) -> list[str]:
    """The SMS budget's use this hour, a provider's slow-down, the fan-out: when there is something to say."""
    lines = []
    total, used = s.sms_budget_total, s.sms_budget_used
    if total is not None and used is not None:
        resets = f", resets {rfc3339(s.sms_budget_resets_at)}" if s.sms_budget_resets_at else ""
        state = "  PAUSED" if s.sms_paused else ""
        lines.append(f"sms budget: {used} of {total} this hour ({s.sms_budget_used_percent:.0f} %){resets}{state}")
    for c in s.channels:
        if c.slowed_seconds > 0:
            lines.append(f"{c.channel}: the provider asked us to slow down: no claims for {c.slowed_seconds:.0f} s")
    if s.fanout_live:
        lines.append(f"fan-out: {s.fanout_live} more dispatch invocation(s) live")
    return lines


def _holds(s: Signals) -> list[str]:
    """Each hold and run of faults of our side by its scope: the whole channel (account) or one route."""
    rows = []
    for c in s.channels:
        runs = (
            [{**c.sender_faults, "route": c.channel, "scope": "account"}] if c.sender_faults else []
        ) + c.route_holds
        for run in runs:
            reason = run.get("reason") or {}
            rows.append(
                [
                    run["route"],
                    run["scope"],
                    f"until {run['held_until']}" if run.get("held_until") else "not held",
                    run["faults"],
                    run.get("destinations", "-"),
                    " ".join(str(p) for p in (reason.get("category"), reason.get("provider"), reason.get("code")) if p),
                ]
            )
    if not rows:
        return []
    return ["", "holds (faults of our side)"] + table(
        ["held", "scope", "state", "faults", "destinations", "reason"], rows
    )


def _ago(seconds: float | None) -> str:
    return "-" if seconds is None else f"{_age(seconds)} ago"
