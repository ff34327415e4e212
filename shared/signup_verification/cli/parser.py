"""verifyctl's argument parser: the commands in their help order, each declared by its module.

Global options (--json) are accepted before or after the command: `verifyctl --json status` and
`verifyctl status --json` are the same.
"""

from __future__ import annotations

import argparse

from .commands import controls, dev, observe, runs, schema, webhooks
from .commands.observe import EXIT_ALERT


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("signup-verification")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="verifyctl",
        description="Signup verification delivery: operator commands.",
        epilog="Exit status: 0 done, 1 error (one line on stderr), 2 usage error, "
        f"{EXIT_ALERT} `status --check` found an alert, 130 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"verifyctl {_version()}")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text (before or after the command)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (
        schema.add_migrate,
        schema.add_grant,
        runs.add_dispatch,
        observe.add_status,
        observe.add_inspect,
        runs.add_reconcile,
        controls.add_sms,
        controls.add_voice,
        controls.add_channel,
        controls.add_suppression,
        webhooks.add_webhooks,
        schema.add_new_key,
        dev.add_dev,
    ):
        add(sub)
    return parser
