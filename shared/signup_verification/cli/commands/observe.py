"""What the service is doing: `status` (the operator signals) and `inspect` (one verification)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ...runtime import Runtime
from . import add_command

EXIT_ALERT = 3  # `status --check`: an alert condition holds (2 is argparse's usage error)


def cmd_status(args: argparse.Namespace, runtime: Runtime) -> int:
    """The operator signals: a table (or --json), with the alerts they would raise."""
    from ...operations import signals
    from ...operations import status_table as status

    snapshot = signals.compute(runtime.db, runtime.config.deployment, runtime.config.signals, with_workers=True)
    print(json.dumps(snapshot.as_json(), indent=2) if args.json else status.render(snapshot))
    return EXIT_ALERT if args.check and snapshot.alerts() else 0


def cmd_inspect(args: argparse.Namespace, runtime: Runtime) -> int:
    """One verification's delivery timeline: masked destination, never a token or code."""
    from ...operations import timeline as inspect

    verification_id = verification_id_of(args.verification_id)
    try:
        found = inspect.timeline(runtime.db, verification_id)
    except inspect.NotFound as exc:
        print(f"verifyctl: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(found.as_json(), indent=2) if args.json else inspect.render(found))
    return 0


def verification_id_of(text: str) -> Any:
    import uuid

    try:
        return uuid.UUID(text)
    except ValueError:
        raise ValueError(f"not a verification id: {text!r}") from None


def add_status(sub: Any) -> None:
    status_cmd = add_command(
        sub,
        "status",
        "operator signals per channel: ready work, ages, claims, reconciler",
        "The operator signals per channel (the status target's numbers), the workers' last "
        "runs and the alerts they would raise.",
        cmd_status,
        json_help="the status target's JSON instead of a table",
    )
    status_cmd.add_argument(
        "--check", action="store_true", help=f"exit {EXIT_ALERT} when an alert condition holds (for scripts and probes)"
    )


def add_inspect(sub: Any) -> None:
    inspect_cmd = add_command(
        sub,
        "inspect",
        "one verification's delivery timeline (masked, no token)",
        "One verification's delivery: its intent and every claim, attempt and outcome, in "
        "order. Destinations are masked; tokens and codes are never stored.",
        cmd_inspect,
    )
    inspect_cmd.add_argument("verification_id", help="the verification_id create answered")
