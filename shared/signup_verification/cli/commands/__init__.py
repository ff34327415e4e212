"""verifyctl's commands, one module per area; each `add(sub)` declares its commands beside the code
that runs them. A command function takes the parsed arguments and the Runtime and returns the exit
status."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any


def add_command(
    sub: Any,
    name: str,
    summary: str,
    description: str,
    func: Callable[..., int],
    *,
    json_help: str = "print JSON instead of text",
    database: bool = True,
) -> argparse.ArgumentParser:
    """A command with its --json (also accepted before the command: `verifyctl --json status`).
    `database`: whether it connects (verifyctl says so when that starts the embedded server)."""
    command = sub.add_parser(name, help=summary, description=description)
    command.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help=json_help)
    command.set_defaults(func=func, database=database)
    return command


def add_group(sub: Any, name: str, summary: str, description: str, dest: str) -> Any:
    """A command group (`verifyctl sms ...`): its actions are the commands."""
    group = sub.add_parser(name, help=summary, description=description)
    return group.add_subparsers(dest=dest, required=True, metavar="ACTION")


def plain(value: Any) -> Any:
    """A dataclass result as JSON-ready data (paths and datetimes as strings)."""
    import dataclasses

    from ...platform.timestamps import rfc3339

    def text(item: Any) -> str:
        from datetime import datetime

        return rfc3339(item) if isinstance(item, datetime) else str(item)

    return json.loads(json.dumps(dataclasses.asdict(value), default=text))


def operator() -> str:
    """Who asked, as the audit columns record it."""
    import getpass

    return f"verifyctl:{getpass.getuser()}"
