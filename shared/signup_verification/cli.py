"""verifyctl: the operator's command line. Errors are one line on stderr and exit status 1."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Callable

from .platform import cloudsql, migrations, secret_manager as secrets
from .platform.database import Database
from .runtime import database_params
from .delivery.messages import check_sms_budget
from .platform.settings import ConfigError, Settings


def _database(settings: Settings) -> Database:
    return Database(database_params(settings), application_name="verifyctl",
                    connector=cloudsql.connector_for(settings, "verifyctl"))


def cmd_migrate(args: argparse.Namespace, settings: Settings) -> int:
    config = migrations.MigrationConfig.from_env(os.environ)
    db = _database(settings)
    try:
        if args.list:
            print(migrations.status(db, config=config).render())
        else:
            print(migrations.migrate(db, config=config).summary())
    finally:
        db.close()
    return 0


def cmd_grant(args: argparse.Namespace, settings: Settings) -> int:
    from .platform import grants as db_access

    for line in db_access.grant(_database(settings), args.writer, args.reader):
        print(f"granted {line}")
    return 0


def cmd_new_key(args: argparse.Namespace, settings: Settings) -> int:
    from .verifications.tokens import new_key_spec

    print(new_key_spec(args.key_id))
    return 0


def cmd_dev(args: argparse.Namespace, settings: Settings) -> int:
    from .local import devserver

    return devserver.run(settings, args)


def cmd_dispatch(args: argparse.Namespace, settings: Settings) -> int:
    """One dispatch invocation (what Cloud Scheduler triggers), its report as JSON on stdout, then
    the signal records. `args.fault` is a fault hook only tools/fault_dispatch.py sets (tests, chaos)."""
    import json

    from .delivery import dispatcher
    from .operations import signals
    from .platform import shutdown
    from .verifications.tokens import Keyring

    fault = getattr(args, "fault", None)
    if fault is not None and settings.is_production:
        raise ConfigError("fault injection is refused in production")
    shutdown.install()
    db = _database(settings)
    try:
        report = dispatcher.dispatch(db, settings, Keyring.from_settings(settings), stop=shutdown.STOP, fault=fault)
    finally:
        dispatcher.close_channels()  # QUIT to the SMTP server: this process sends nothing more
    signals.emit(db, settings, source="dispatch")
    print(json.dumps(report.as_dict()), flush=True)
    return 0


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    """The operator signals: a table (or --json), with the alerts they would raise."""
    import json

    from .operations import signals, status_table as status

    snapshot = signals.compute(_database(settings), settings.deployment, with_workers=True)
    print(json.dumps(snapshot.as_json(), indent=2) if args.json else status.render(snapshot))
    return 2 if args.check and snapshot.alerts() else 0


def cmd_inspect(args: argparse.Namespace, settings: Settings) -> int:
    """One verification's delivery timeline: masked destination, never a token or code."""
    import json
    import uuid

    from .operations import timeline as inspect

    try:
        verification_id = uuid.UUID(args.verification_id)
    except ValueError:
        raise ValueError(f"not a verification id: {args.verification_id!r}") from None
    try:
        found = inspect.timeline(_database(settings), verification_id)
    except inspect.NotFound as exc:
        print(f"verifyctl: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(found.as_json(), indent=2) if args.json else inspect.render(found))
    return 0


def cmd_reconcile(args: argparse.Namespace, settings: Settings) -> int:
    """One reconcile run now (what Cloud Scheduler triggers), its report as JSON on stdout."""
    import json

    from .platform import logs as service_logging
    from .operations import reconciler

    service_logging.configure(stderr=True)  # its log records on stderr, the report on stdout
    report = reconciler.reconcile(_database(settings), settings)
    print(json.dumps(report.as_json()), flush=True)
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
    try:
        settings = Settings.from_env(secrets.resolve_env(os.environ))
        check_sms_budget(settings)
        return args.func(args, settings)
    except (ConfigError, ValueError, RuntimeError) as exc:
        print(f"verifyctl: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
