"""verifyctl: the operator's command line. Errors are one line on stderr and exit status 1."""
from __future__ import annotations

import argparse
import sys
from typing import Callable

from . import config as configuration
from .platform import migrations
from .platform.errors import ConfigError
from .runtime import Runtime


def cmd_migrate(args: argparse.Namespace, runtime: Runtime) -> int:
    config, db = runtime.config.migrations, runtime.db  # closed with the runtime
    if args.list:
        print(migrations.status(db, config=config).render())
    else:
        print(migrations.migrate(db, config=config).summary())
    return 0


def cmd_grant(args: argparse.Namespace, runtime: Runtime) -> int:
    from .platform import grants as db_access

    for line in db_access.grant(runtime.db, args.writer, args.reader):
        print(f"granted {line}")
    return 0


def cmd_new_key(args: argparse.Namespace, runtime: Runtime) -> int:
    from .verifications.tokens import new_key_spec

    print(new_key_spec(args.key_id))
    return 0


def cmd_dev(args: argparse.Namespace, runtime: Runtime) -> int:
    from .local import devserver

    return devserver.run(runtime.config, args)


def cmd_dispatch(args: argparse.Namespace, runtime: Runtime) -> int:
    """One dispatch invocation (what Cloud Scheduler triggers), its report as JSON on stdout, then
    the signal records. `args.fault` is a fault hook only tools/fault_dispatch.py sets (tests, chaos)."""
    import json

    from .platform import shutdown

    fault = getattr(args, "fault", None)
    if fault is not None and runtime.config.is_production:
        raise ConfigError("fault injection is refused in production")
    shutdown.install()
    try:
        report = runtime.dispatch(shutdown.STOP, fault=fault)
    finally:
        runtime.close_channels()  # QUIT to the SMTP server: this process sends nothing more
    print(json.dumps(report.as_dict()), flush=True)
    return 0


def cmd_status(args: argparse.Namespace, runtime: Runtime) -> int:
    """The operator signals: a table (or --json), with the alerts they would raise."""
    import json

    from .operations import signals, status_table as status

    snapshot = signals.compute(runtime.db, runtime.config.deployment, runtime.config.signals, with_workers=True)
    print(json.dumps(snapshot.as_json(), indent=2) if args.json else status.render(snapshot))
    return 2 if args.check and snapshot.alerts() else 0


def cmd_inspect(args: argparse.Namespace, runtime: Runtime) -> int:
    """One verification's delivery timeline: masked destination, never a token or code."""
    import json
    import uuid

    from .operations import timeline as inspect

    try:
        verification_id = uuid.UUID(args.verification_id)
    except ValueError:
        raise ValueError(f"not a verification id: {args.verification_id!r}") from None
    try:
        found = inspect.timeline(runtime.db, verification_id)
    except inspect.NotFound as exc:
        print(f"verifyctl: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(found.as_json(), indent=2) if args.json else inspect.render(found))
    return 0


def cmd_reconcile(args: argparse.Namespace, runtime: Runtime) -> int:
    """One reconcile run now (what Cloud Scheduler triggers), its report as JSON on stdout."""
    import json

    from .platform import logs as service_logging
    from .operations import reconciler

    service_logging.configure(runtime.config.logging, stderr=True)  # its log records on stderr, the report on stdout
    report = reconciler.reconcile(runtime.db, runtime.config.reconciler, signals_config=runtime.config.signals)
    print(json.dumps(report.as_json()), flush=True)
    return 0


def cmd_sms_resume(args: argparse.Namespace, runtime: Runtime) -> int:
    """Lift a paused SMS budget for the rest of this hour: another SMS_MAX_PER_HOUR sends (issue 15)."""
    import getpass

    from .operations import signals

    left = signals.resume_sms(runtime.db, runtime.config.signals, f"verifyctl:{getpass.getuser()}")
    print(f"SMS resumed: {left} sends left this hour")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="verifyctl", description="Signup verification delivery: operator commands.")
    sub = parser.add_subparsers(dest="command", required=True)
    migrate = sub.add_parser("migrate", help="apply pending SQL migrations and changed definitions")
    migrate.add_argument("--list", action="store_true",
                         help="show each migration (applied or pending) and definition (current, changed, new)")
    migrate.set_defaults(func=cmd_migrate)
    grant = sub.add_parser("grant", help="give the functions' database users their privileges (after migrate)")
    grant.add_argument("--writer", action="append", default=[], help="database user that reads and writes")
    grant.add_argument("--reader", action="append", default=[], help="database user that only reads")
    grant.set_defaults(func=cmd_grant)
    sub.add_parser("dispatch", help="run one delivery-worker invocation now (prints its report)"
                   ).set_defaults(func=cmd_dispatch)
    status_cmd = sub.add_parser("status", help="operator signals per channel: ready work, ages, claims, reconciler")
    status_cmd.add_argument("--json", action="store_true", help="the status target's JSON instead of a table")
    status_cmd.add_argument("--check", action="store_true", help="exit 2 when an alert condition holds")
    status_cmd.set_defaults(func=cmd_status)
    inspect_cmd = sub.add_parser("inspect", help="one verification's delivery timeline (masked, no token)")
    inspect_cmd.add_argument("verification_id")
    inspect_cmd.add_argument("--json", action="store_true")
    inspect_cmd.set_defaults(func=cmd_inspect)
    sub.add_parser("reconcile", help="run one reconcile sweep now (prints its report)").set_defaults(func=cmd_reconcile)
    sms = sub.add_parser("sms", help="the global SMS budget (SMS_MAX_PER_HOUR)")
    sms_sub = sms.add_subparsers(dest="sms_command", required=True)
    sms_sub.add_parser("resume", help="grant this hour another budget's worth of SMS after a pause"
                       ).set_defaults(func=cmd_sms_resume)
    key = sub.add_parser("new-key", help="print a fresh TOKEN_KEYS entry")
    key.add_argument("--key-id", default=None)
    key.set_defaults(func=cmd_new_key)
    dev = sub.add_parser("dev", help="run the whole service locally: database, every function, mailbox, scheduler")
    from .local import devserver  # its options live beside the code that reads them

    devserver.add_arguments(dev)
    dev.set_defaults(func=cmd_dev)
    return parser


def main(argv: list[str] | None = None, *, fault: Callable[[str], None] | None = None) -> int:
    """`fault`: a dispatch fault hook, for tools/fault_dispatch.py only (refused in production)."""
    args = build_parser().parse_args(argv)
    args.fault = fault
    runtime: Runtime | None = None
    try:
        runtime = Runtime(configuration.load(), application_name="verifyctl")
        return args.func(args, runtime)
    except (ConfigError, ValueError, RuntimeError) as exc:
        print(f"verifyctl: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        if runtime is not None:
            runtime.close()


if __name__ == "__main__":
    sys.exit(main())
