#!/usr/bin/env python3
"""Test-only: one fan-out dispatch invocation, as a Cloud Tasks task starts it on the dispatch
service, for the chaos run (tools/chaos_fanout.py starts one per task it receives).

    python tools/chaos_sibling.py SLOT
    python tools/chaos_sibling.py nudge     (a nudged invocation: outbox/nudge.py's task)

The same run as `verifyctl dispatch` (operations/dispatch_run.py), as the fan-out invocation of
the reserved SLOT: it starts none and does not wait idle. Its report as JSON on stdout; a slot it
could not claim (a replayed or made-up task: delivery/fanout.py) runs nothing and prints
`{"not_claimed": <what the slot was>}`."""

from __future__ import annotations

import json
import sys

from signup_verification.config import load
from signup_verification.delivery.fanout import Invocation, SlotNotClaimed
from signup_verification.operations import dispatch_run
from signup_verification.platform import logs as service_logging
from signup_verification.platform import shutdown
from signup_verification.platform.database import UnavailableError
from signup_verification.runtime import Runtime


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: chaos_sibling.py SLOT|nudge", file=sys.stderr)
        return 2
    runtime = Runtime(load(), application_name="chaos-sibling")
    config = runtime.config
    service_logging.configure(config.logging, stderr=True)
    shutdown.install()
    try:
        report = dispatch_run.run(
            runtime.db, config.dispatch, config.retry, config.signals, runtime.keyring, runtime.channels,
            stop=shutdown.STOP, close_channels=runtime.close_channels, invocation=Invocation.nudged() if argv[0] == "nudge" else Invocation.fanned_out(argv[0]),
        )  # fmt: skip
    except UnavailableError as exc:
        print(f"chaos_sibling: {exc}", file=sys.stderr)
        return 1
    except SlotNotClaimed as refused:
        print(json.dumps({"not_claimed": refused.was}), flush=True)
        return 0
    finally:
        runtime.close()
    print(json.dumps(report.as_dict()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
