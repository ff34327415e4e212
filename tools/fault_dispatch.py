#!/usr/bin/env python3
"""Test-only: one `verifyctl dispatch` that SIGKILLs itself at a fault point.

    python tools/fault_dispatch.py after_claim|after_begin|after_send

The crash tests (tests/integration/delivery/test_dispatcher_crash.py) and the chaos run
(tools/chaos.py) use it to leave the exact state a real crash leaves: a claim never begun, an
attempt begun and never settled, a send the provider accepted and nobody recorded. The product
code knows only that the dispatcher calls an optional hook at those points; the kill lives here,
and verifyctl refuses a hook in production (ENVIRONMENT=production).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Callable

from signup_verification import cli
from signup_verification.operations.dispatcher import FAULT_POINTS

_log = logging.getLogger("signup_verification.operations.dispatcher")


def kill_at(point: str) -> Callable[[str], None]:
    def hook(reached: str) -> None:
        if reached == point:
            _log.warning("fault point %s: killing this process", point)
            os.kill(os.getpid(), signal.SIGKILL)

    return hook


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in FAULT_POINTS:
        print(f"usage: fault_dispatch.py {'|'.join(FAULT_POINTS)}", file=sys.stderr)
        return 2
    return cli.main(["dispatch", "--json"], fault=kill_at(argv[0]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
