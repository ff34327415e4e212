"""One worker run now, as Cloud Scheduler triggers it: `dispatch`, `reconcile`. The report on stdout
(one line, or with --json the target's JSON answer), the log records on stderr (the functions' own
logging configuration)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ...platform.errors import ConfigError
from ...runtime import Runtime
from . import add_command

_AS_JSON = "the report as the target's JSON answer instead of a line"


def cmd_dispatch(args: argparse.Namespace, runtime: Runtime) -> int:
    """One dispatch invocation (what Cloud Scheduler triggers), its report on stdout, then the signal
    records. `args.fault` is a fault hook only tools/fault_dispatch.py sets (tests, chaos)."""
    from ...platform import logs as service_logging
    from ...platform import shutdown

    fault = getattr(args, "fault", None)
    if fault is not None and runtime.config.is_production:
        raise ConfigError("fault injection is refused in production")
    service_logging.configure(runtime.config.logging, stderr=True)  # as the functions log; the report on stdout
    shutdown.install()
    from ...operations.dispatcher import DispatchRun, dispatch

    run = DispatchRun(
        runtime.db,
        runtime.config.dispatch,
        runtime.keyring,
        runtime.channels,
        stop=shutdown.STOP,
        fault=fault,
        close_channels=runtime.close_channels,
    )
    try:
        report = dispatch(run)
    finally:
        runtime.close_channels()  # QUIT to the SMTP server: this process sends nothing more
    note = _transport_note(args, runtime)
    if note:  # where the messages went, when that was a local choice
        print(f"verifyctl: {note}", file=sys.stderr, flush=True)
    print(json.dumps(report.as_dict()) if args.json else report.summary(), flush=True)
    return 0


def _transport_note(args: argparse.Namespace, runtime: Runtime) -> str | None:
    """Outside production only: where the messages went (the laptop's mailbox or console outbox)."""
    if runtime.config.is_production:
        return None  # a deployed job or an operator's run: the transports are the deployment's own
    from ...local import devenv

    return devenv.transport_note(runtime.config, getattr(args, "mailbox", None))


def cmd_reconcile(args: argparse.Namespace, runtime: Runtime) -> int:
    """One reconcile run now (what Cloud Scheduler triggers), its report on stdout."""
    from ...operations.reconciler import runner
    from ...platform import logs as service_logging

    service_logging.configure(runtime.config.logging, stderr=True)  # its log records on stderr, the report on stdout
    report = runner.reconcile(runtime.db, runtime.config.reconciler, signals_config=runtime.config.signals)
    print(json.dumps(report.as_json()) if args.json else report.summary(), flush=True)
    return 0


def add_dispatch(sub: Any) -> None:
    add_command(
        sub,
        "dispatch",
        "run one delivery-worker invocation now (prints its report)",
        "One dispatch invocation, as Cloud Scheduler triggers it: claim ready deliveries, send them "
        "through this environment's transports, settle the outcomes. The report is one line on stdout "
        "(the target's JSON with --json), log records on stderr.",
        cmd_dispatch,
        json_help=_AS_JSON,
    )


def add_reconcile(sub: Any) -> None:
    add_command(
        sub,
        "reconcile",
        "run one reconcile sweep now (prints its report)",
        "One reconcile sweep, as Cloud Scheduler triggers it: expired leases, ambiguous attempts, "
        "retention. The report is one line on stdout (the target's JSON with --json), log records on stderr.",
        cmd_reconcile,
        json_help=_AS_JSON,
    )
