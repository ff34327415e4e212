"""What `verifyctl dev` prints once everything listens: every URL, where the webhooks go (and with
which secret), which return-URL origins are allowed, and the demo site's link only while the
webhooks come to it. Its last line, "Ctrl-C stops everything.", says it is ready."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..platform.config import Target
from .wiring import Wiring

READY = "Ctrl-C stops everything."
_NOTES: dict[str, str] = {
    Target.CONFIRM: " <- links in emails point here",
    Target.DELIVERY_REPORTS: " <- the mailbox posts SendGrid and Twilio reports here",
}


@dataclass(frozen=True)
class Shown:
    ports: dict[str, int]  # target -> port
    scheduled: set[str]  # the targets the scheduler emulation calls
    interval: float  # 0: on demand only
    browser: str  # the host a browser uses
    host: str
    smtp_port: int
    mailbox_port: int


def lines(
    shown: Shown,
    applied: Sequence[str],
    where: str,
    wiring: Wiring,
    site_running: bool,
    local_dir: Path,
    known_targets: list[str],
    user_env: Mapping[str, str] = os.environ,
) -> list[str]:
    found = [f"database ready ({len(applied)} migration(s) applied; {where})"]
    for target, port in shown.ports.items():
        note = _NOTES.get(target, "")
        if target in shown.scheduled:
            note = (
                f" <- scheduler every {shown.interval:g} s" if shown.interval > 0 else " <- on demand (mailbox button)"
            )
        found.append(_row(target, f"http://{shown.browser}:{port}/{note}"))
    found += [_row(t, "(not in functions/main.py yet: skipped)") for t in known_targets if t not in shown.ports]
    mailbox = f"http://{shown.browser}:{shown.mailbox_port}/ <- email (SMTP {shown.host}:{shown.smtp_port}) and SMS"
    found.append(_row("mailbox", mailbox))
    found += [_row(name, text) for name, text in wiring.describe(user_env, local_dir)]
    if site_running:
        found.append(_row("demo site", f"{wiring.demo_origin}/ <- sign up here; its /webhooks receives the events"))
    elif wiring.webhook_url is not None and not wiring.runs_demo:
        found.append(_row("demo site", "(not started: the webhooks go to your WEBHOOK_URL)"))
    return [*found, READY]


def _row(name: str, text: str) -> str:
    return f"{name:<22} {text}"
