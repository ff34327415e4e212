"""`verifyctl dev`: the whole service on this machine (local/devserver.py)."""

from __future__ import annotations

import argparse
from typing import Any

from ...runtime import Runtime


def cmd_dev(args: argparse.Namespace, runtime: Runtime) -> int:
    from ...local import devserver

    return devserver.run(runtime.config, args)


def add_dev(sub: Any) -> None:
    from ...local import devserver  # its options live beside the code that reads them

    dev = sub.add_parser(
        "dev",
        help="run the whole service locally: database, every function, mailbox, scheduler",
        description="The whole service on this machine: embedded PostgreSQL, every function "
        "target, the local mailbox (SMTP, SMS) and the Cloud Scheduler emulation. "
        "Ctrl-C stops everything.",
    )
    devserver.add_arguments(dev)
    dev.set_defaults(func=cmd_dev, database=False)  # it starts (and stops) its own database
