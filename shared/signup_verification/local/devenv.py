"""What a running `verifyctl dev` tells the other verifyctl commands: its transports and database.

`verifyctl dev` writes <local dir>/dev.json (mode 0600) once everything listens and removes it when
it stops. A `verifyctl dispatch` (or any other command) run beside it in the same local dir reads it,
so it sends to the mailbox the emulation runs, not to files; a variable set in the environment
always wins, and a file whose process is gone is ignored. The credentials in it are the local fake
Twilio's dummy ones.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..platform.channels import MESSAGE_CHANNELS

if TYPE_CHECKING:
    from ..config import Config

STATE_FILE = "dev.json"
# What the function processes of `verifyctl dev` get that a command beside it should share.
SHARED = (
    "DATABASE_URL",
    "EMAIL_TRANSPORT",
    "SMTP_HOST",
    "SMTP_PORT",
    "SMTP_SECURITY",
    "SMS_TRANSPORT",
    "WHATSAPP_TRANSPORT",
    "VOICE_TRANSPORT",
    "TWILIO_API_URL",
    "TWILIO_ACCOUNT_SID",
    "TWILIO_AUTH_TOKEN",
    "TWILIO_FROM",
    "TWILIO_WHATSAPP_FROM",
    "TWILIO_WHATSAPP_CONTENT_SIDS",
    "VERIFY_LINK_BASE",
    "WEBHOOK_URL",  # where the events go (local/wiring.py) and the development secret
    "WEBHOOK_SECRET",
    "DELIVERY_REPORTS_URL",  # Twilio's StatusCallback, the local delivery_reports target
)


def publish(local_dir: Path, child_env: Mapping[str, str], mailbox_url: str) -> Path:
    path = Path(local_dir) / STATE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "pid": os.getpid(),
        "mailbox": mailbox_url,
        "environment": {k: child_env[k] for k in SHARED if child_env.get(k)},
    }
    fd = os.open(path.with_suffix(".tmp"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(state, out)
    os.replace(path.with_suffix(".tmp"), path)
    return path


def withdraw(local_dir: Path) -> None:
    path = Path(local_dir) / STATE_FILE
    try:
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass


def running(local_dir: Path) -> dict[str, Any] | None:
    """The state of the `verifyctl dev` serving this local dir, if one is alive."""
    try:
        state = json.loads((Path(local_dir) / STATE_FILE).read_text(encoding="utf-8"))
        os.kill(int(state["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return state if isinstance(state.get("environment"), dict) else None


def environment(local_dir: Path) -> tuple[dict[str, str], str | None] | None:
    """The process environment with the running emulation's settings under it, and the mailbox URL;
    None when no emulation runs here or the environment chooses its own transports."""
    state = running(local_dir)
    if state is None or os.environ.get("EMAIL_TRANSPORT") or os.environ.get("SMS_TRANSPORT"):
        return None
    shared = {k: str(v) for k, v in state["environment"].items() if k in SHARED}
    return {**shared, **{k: v for k, v in os.environ.items() if v}}, state.get("mailbox")


def transport_note(config: Config, mailbox: str | None = None) -> str | None:
    """One line saying where this command's messages go when that is a local choice."""
    channels = config.channels
    if config.is_production:
        return None
    if mailbox:
        return f"sending through the running `verifyctl dev`: mailbox {mailbox}/ (set EMAIL_TRANSPORT to override)"
    console = [c for c in MESSAGE_CHANNELS if channels.transport(c) == "console"]
    if not console:
        return None
    return (
        f"{' and '.join(console)} written to {config.local_dir / 'outbox'} (console transport; no `verifyctl dev` "
        f"runs in {config.local_dir} — start one to see them in its mailbox)"
    )
