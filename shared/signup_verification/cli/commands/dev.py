"""`verifyctl dev`: the whole service on this machine (local/devserver.py).

The command and its options are declared here, without the laptop emulation: building verifyctl's
parser never imports `signup_verification.local`, which the deploy bundle does not ship (the
migrate and grant jobs build the same parser). Only running `verifyctl dev` imports it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ...runtime import Runtime

FAST_INTERVAL_SECONDS = 2.0  # --fast: the scheduler emulation's interval
LAPTOP_ONLY = "signup_verification.local"


def cmd_dev(args: argparse.Namespace, runtime: Runtime) -> int:
    try:
        from ...local import devserver
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith(LAPTOP_ONLY):
            raise
        raise RuntimeError(
            f"verifyctl dev needs the laptop emulation ({LAPTOP_ONLY}), which this installation does not "
            "have (a deployed image never does): run it from a checkout, `python3 dev.py run`"
        ) from exc
    return devserver.run(runtime.config, args)


def add_dev(sub: Any) -> None:
    dev = sub.add_parser(
        "dev",
        help="run the whole service locally: database, every function, mailbox, scheduler",
        description="The whole service on this machine: embedded PostgreSQL, every function "
        "target, the local mailbox (SMTP, SMS) and the Cloud Scheduler emulation. "
        "Ctrl-C stops everything.",
    )
    add_arguments(dev)
    dev.set_defaults(func=cmd_dev, database=False)  # it starts (and stops) its own database


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`verifyctl dev`'s options (what local/devserver.run reads)."""
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    parser.add_argument(
        "--base-port",
        type=int,
        default=8081,
        help="create_verification's port; confirm, dispatch, reconcile and status follow (8081-8085)",
    )
    parser.add_argument("--smtp-port", type=int, default=None, help="the mailbox's SMTP port (default SMTP_PORT, 8025)")
    parser.add_argument("--mailbox-port", type=int, default=8090, help="the mailbox web page and fake Twilio API")
    parser.add_argument(
        "--site-port",
        type=int,
        default=8089,
        help="the demo signup site: its form, webhooks and account pages (not started when WEBHOOK_URL points elsewhere)",
    )
    parser.add_argument(
        "--schedule-seconds",
        type=float,
        default=None,  # local/devserver.schedule_seconds: else VERIFY_DEV_SCHEDULE_SECONDS, else 60
        help="how often the scheduler emulation calls dispatch and reconcile (default 60, "
        "like Cloud Scheduler; env VERIFY_DEV_SCHEDULE_SECONDS)",
    )
    parser.add_argument(
        "--fast",
        action="store_const",
        const=FAST_INTERVAL_SECONDS,
        default=None,
        help=f"call them every {FAST_INTERVAL_SECONDS:g} s",
    )
    parser.add_argument(
        "--no-scheduler",
        action="store_true",
        help="never call them on a schedule (the mailbox's Run dispatch now button still runs both once)",
    )
    parser.add_argument(
        "--report-delay",
        type=_seconds,
        default=10.0,
        help="seconds before the mailbox reports an email delivered or an SMS queued/sent/delivered to "
        "delivery_reports (default 10: time to press Bounce this; a message's Report now posts at once)",
    )
    parser.add_argument(
        "--source", type=Path, default=None, help="the functions' main.py (default: functions/main.py of the checkout)"
    )


def _seconds(value: str) -> float:
    """A non-negative number of seconds, or argparse's one-line usage error."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 86400:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds between 0 and 86400")
    return seconds
