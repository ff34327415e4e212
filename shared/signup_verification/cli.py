"""verifyctl: the operator's command line. Errors are one line on stderr and exit status 1.

Exit status: 0 done; 1 an error (one line on stderr, naming the cause and the next step); 2 a usage
error (argparse); 3 `status --check` found an alert condition; 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from . import config as configuration
from .platform import migrations
from .platform.database import ConnectionParams, DatabaseError, InterfaceError, UnavailableError
from .platform.errors import ConfigError
from .runtime import Runtime

EXIT_ALERT = 3  # `status --check`: an alert condition holds (2 is argparse's usage error)


def cmd_migrate(args: argparse.Namespace, runtime: Runtime) -> int:
    config, db = runtime.config.migrations, runtime.db  # closed with the runtime
    if args.list:
        listing = migrations.status(db, config=config)
        print(json.dumps(_plain(listing), indent=2) if args.json else listing.render())
    else:
        result = migrations.migrate(db, config=config)
        print(json.dumps(_plain(result)) if args.json else result.summary())
    return 0


def cmd_grant(args: argparse.Namespace, runtime: Runtime) -> int:
    from .platform import grants as db_access

    granted = list(db_access.grant(runtime.db, args.writer, args.reader))
    if args.json:
        print(json.dumps({"granted": granted}))
    for line in [] if args.json else granted:
        print(f"granted {line}")
    return 0


def cmd_new_key(args: argparse.Namespace, runtime: Runtime) -> int:
    from .verifications.tokens import new_key_spec

    spec = new_key_spec(args.key_id)
    print(json.dumps({"token_keys_entry": spec}) if args.json else spec)
    return 0


def cmd_dev(args: argparse.Namespace, runtime: Runtime) -> int:
    from .local import devserver

    return devserver.run(runtime.config, args)


def cmd_dispatch(args: argparse.Namespace, runtime: Runtime) -> int:
    """One dispatch invocation (what Cloud Scheduler triggers), its report as JSON on stdout, then
    the signal records. `args.fault` is a fault hook only tools/fault_dispatch.py sets (tests, chaos)."""
    from .local import devenv
    from .platform import logs as service_logging
    from .platform import shutdown

    fault = getattr(args, "fault", None)
    if fault is not None and runtime.config.is_production:
        raise ConfigError("fault injection is refused in production")
    service_logging.configure(runtime.config.logging, stderr=True)  # as the functions log; the report on stdout
    shutdown.install()
    from .operations import dispatch_run

    config = runtime.config
    try:
        report = dispatch_run.run(
            runtime.db, config.dispatch, config.retry, config.signals, runtime.keyring, runtime.channels,
            stop=shutdown.STOP, close_channels=runtime.close_channels, fault=fault,
        )  # fmt: skip
    finally:
        runtime.close_channels()  # QUIT to the SMTP server: this process sends nothing more
    note = devenv.transport_note(runtime.config, getattr(args, "mailbox", None))
    if note:  # where the messages went, when that was a local choice
        print(f"verifyctl: {note}", file=sys.stderr, flush=True)
    print(json.dumps(report.as_dict()), flush=True)
    return 0


def cmd_status(args: argparse.Namespace, runtime: Runtime) -> int:
    """The operator signals: a table (or --json), with the alerts they would raise."""
    from .operations import signals
    from .operations import status_table as status

    snapshot = signals.compute(runtime.db, runtime.config.deployment, runtime.config.signals, with_workers=True)
    print(json.dumps(snapshot.as_json(), indent=2) if args.json else status.render(snapshot))
    return EXIT_ALERT if args.check and snapshot.alerts() else 0


def cmd_inspect(args: argparse.Namespace, runtime: Runtime) -> int:
    """One verification's delivery timeline: masked destination, never a token or code."""
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
    from .operations import reconciler
    from .platform import logs as service_logging

    service_logging.configure(runtime.config.logging, stderr=True)  # its log records on stderr, the report on stdout
    report = reconciler.reconcile(runtime.db, runtime.config.reconciler, signals_config=runtime.config.signals)
    print(json.dumps(report.as_json()), flush=True)
    return 0


def cmd_sms_resume(args: argparse.Namespace, runtime: Runtime) -> int:
    """Lift a paused SMS budget for the rest of this hour: another SMS_MAX_PER_HOUR sends (issue 15)."""
    import getpass

    from .operations import signals

    left = signals.resume_sms(runtime.db, runtime.config.signals, f"verifyctl:{getpass.getuser()}")
    if getattr(args, "json", False):
        print(json.dumps({"sms_budget_left": left}))
    else:
        print(f"SMS resumed: {left} sends left this hour")
    return 0


def cmd_channel_resume(args: argparse.Namespace, runtime: Runtime) -> int:
    """Lift a channel's hold after a run of sender or account faults, once the cause is fixed."""
    import getpass

    from .operations import channel_holds

    held = channel_holds.resume(runtime.db, args.channel, f"verifyctl:{getpass.getuser()}")
    if getattr(args, "json", False):
        print(json.dumps({"channel": args.channel, "was_held": held}))
    else:
        print(f"{args.channel} resumed: sends start at the next dispatch" if held else f"{args.channel} was not held")
    return 0


def cmd_suppression_list(args: argparse.Namespace, runtime: Runtime) -> int:
    """Destinations a provider reported permanently undeliverable (issue 13): keys, never destinations."""
    from .operations import suppression_list as suppressions

    found = suppressions.entries(runtime.db)
    print(json.dumps([s.as_json() for s in found]) if args.json else suppressions.render(found))
    return 0


def cmd_suppression_clear(args: argparse.Namespace, runtime: Runtime) -> int:
    """Let a destination receive messages again: by destination (normalised as create does) or --key."""
    import getpass

    from pydantic import ValidationError

    from .api.models import CreateVerificationRequest
    from .operations import suppression_list as suppressions
    from .verifications import abuse

    if args.key:
        try:
            keys, channel = [bytes.fromhex(args.key)], args.channel
        except ValueError:
            raise ValueError("--key must be the hex key `verifyctl suppression list` shows") from None
        if channel is None:
            raise ValueError("--key needs --channel email|sms")
    elif args.destination:
        channel = args.channel or ("email" if "@" in args.destination else "sms")
        try:
            request = CreateVerificationRequest.model_validate(
                {"account_id": "verifyctl", "channel": channel, "destination": args.destination}
            )
        except ValidationError:
            raise ValueError(f"not a valid {channel} destination") from None
        policy = runtime.config.create.abuse
        # under every key of the ring: an entry written before a TOKEN_KEYS rotation is found too
        found = abuse.destination_keys([k.secret for k in runtime.keyring.keys], policy, channel, request.destination)
        keys = list(dict.fromkeys(found.exact + found.alias))  # its exact entry, and an older alias-keyed one
    else:
        raise ValueError("give the destination to clear, or --key HEX --channel email|sms")
    by = f"verifyctl:{getpass.getuser()}"
    cleared = any([suppressions.clear(runtime.db, channel, k, by) for k in keys])  # every one, not the first
    if args.json:
        print(json.dumps({"cleared": cleared}))
    else:
        print("cleared: the destination may receive messages again" if cleared else "no such suppression")
    return 0 if cleared else 1


def _plain(value: Any) -> Any:
    """A dataclass result as JSON-ready data (paths and datetimes as strings)."""
    import dataclasses

    return json.loads(json.dumps(dataclasses.asdict(value), default=str))


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("signup-verification")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _command(
    sub: Any,
    name: str,
    summary: str,
    description: str,
    func: Callable[..., int],
    *,
    json_help: str = "print JSON instead of text",
) -> argparse.ArgumentParser:
    command = sub.add_parser(name, help=summary, description=description)
    command.add_argument("--json", action="store_true", help=json_help)
    command.set_defaults(func=func)
    return command


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="verifyctl",
        description="Signup verification delivery: operator commands.",
        epilog="Exit status: 0 done, 1 error (one line on stderr), 2 usage error, "
        f"{EXIT_ALERT} `status --check` found an alert, 130 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"verifyctl {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    migrate = _command(
        sub,
        "migrate",
        "apply pending SQL migrations and changed definitions",
        "Apply the numbered migrations the database lacks and re-apply changed definitions "
        "(functions, views), in order, under a lock. Safe to run again.",
        cmd_migrate,
    )
    migrate.add_argument(
        "--list",
        action="store_true",
        help="show each migration (applied or pending) and definition (current, changed, new)",
    )
    grant = _command(
        sub,
        "grant",
        "give the functions' database users their privileges (after migrate)",
        "Create the group roles and add each named database user to one (terraform creates the users).",
        cmd_grant,
    )
    grant.add_argument("--writer", action="append", default=[], help="database user that reads and writes")
    grant.add_argument("--reader", action="append", default=[], help="database user that only reads")
    _command(
        sub,
        "dispatch",
        "run one delivery-worker invocation now (prints its report)",
        "One dispatch invocation, as Cloud Scheduler triggers it: claim ready deliveries, send them "
        "through this environment's transports, settle the outcomes. The report is JSON on stdout, "
        "log records on stderr.",
        cmd_dispatch,
        json_help="the report is always JSON (accepted for uniformity)",
    )
    status_cmd = _command(
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
    inspect_cmd = _command(
        sub,
        "inspect",
        "one verification's delivery timeline (masked, no token)",
        "One verification's delivery: its intent and every claim, attempt and outcome, in "
        "order. Destinations are masked; tokens and codes are never stored.",
        cmd_inspect,
    )
    inspect_cmd.add_argument("verification_id", help="the verification_id create answered")
    _command(
        sub,
        "reconcile",
        "run one reconcile sweep now (prints its report)",
        "One reconcile sweep, as Cloud Scheduler triggers it: expired leases, ambiguous attempts, "
        "retention. The report is JSON on stdout, log records on stderr.",
        cmd_reconcile,
        json_help="the report is always JSON (accepted for uniformity)",
    )
    sms = sub.add_parser(
        "sms",
        help="the global SMS budget (SMS_MAX_PER_HOUR)",
        description="The global SMS budget: past SMS_MAX_PER_HOUR in a UTC hour, SMS sends "
        "pause (intents stay eligible) until the next hour or a resume.",
    )
    sms_sub = sms.add_subparsers(dest="sms_command", required=True, metavar="ACTION")
    _command(
        sms_sub,
        "resume",
        "grant this hour another budget's worth of SMS after a pause",
        "Grant the current UTC hour another SMS_MAX_PER_HOUR sends (recorded with who asked).",
        cmd_sms_resume,
    )
    channel = sub.add_parser(
        "channel",
        help="a channel held after a run of sender or account faults",
        description="A run of failures of our sender or account (credentials, an unregistered sender, an "
        "exhausted quota) holds the channel: its deliveries wait, none fails. `status` shows it.",
    )
    channel_sub = channel.add_subparsers(dest="channel_command", required=True, metavar="ACTION")
    resume = _command(
        channel_sub,
        "resume",
        "let a held channel send again once its cause is fixed",
        "Lift the channel's hold and start its fault count afresh (recorded with who asked).",
        cmd_channel_resume,
    )
    resume.add_argument("channel", choices=("email", "sms"))
    suppression = sub.add_parser(
        "suppression",
        help="destinations refused after a delivery failed for the recipient's fault",
        description="The suppression list: create refuses an exact destination whose delivery failed for the "
        "recipient's fault (a hard bounce, an invalid or unsubscribed number, a spam report), until it is "
        "cleared here or SUPPRESSION_DAYS pass.",
    )
    suppression_sub = suppression.add_subparsers(dest="suppression_command", required=True, metavar="ACTION")
    _command(suppression_sub, "list", "show the current entries (keys, never destinations)",
             "The entries that still block create, newest first.", cmd_suppression_list)  # fmt: skip
    clear = _command(suppression_sub, "clear", "let a destination receive messages again",
                     "Remove the entry of a destination (or of a --key from `list`).", cmd_suppression_clear)  # fmt: skip
    clear.add_argument("destination", nargs="?", help="the email address or E.164 number")
    clear.add_argument("--channel", choices=("email", "sms"), help="default: email if it has an @")
    clear.add_argument("--key", help="the hex key `suppression list` shows (instead of a destination)")
    key = _command(
        sub,
        "new-key",
        "print a fresh TOKEN_KEYS entry",
        "Print a new key_id:secret entry to prepend to TOKEN_KEYS (the first entry signs, every entry verifies).",
        cmd_new_key,
    )
    key.add_argument("--key-id", default=None)
    dev = sub.add_parser(
        "dev",
        help="run the whole service locally: database, every function, mailbox, scheduler",
        description="The whole service on this machine: embedded PostgreSQL, every function "
        "target, the local mailbox (SMTP, SMS) and the Cloud Scheduler emulation. "
        "Ctrl-C stops everything.",
    )
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
        runtime = Runtime(_load(args), application_name="verifyctl")
        return args.func(args, runtime)
    except UnavailableError as exc:
        print(f"verifyctl: {explain_unavailable(exc, runtime)}", file=sys.stderr)
        return 1
    except DatabaseError as exc:
        print(f"verifyctl: {explain_database_error(exc)}", file=sys.stderr)
        return 1
    except (ConfigError, ValueError, RuntimeError) as exc:
        print(f"verifyctl: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        if runtime is not None:
            runtime.close()


def _load(args: argparse.Namespace) -> configuration.Config:
    """The configuration; beside a running `verifyctl dev` (same local dir), with its transports and
    database under the environment's own settings (local/devenv.py)."""
    from .local import devenv

    config = configuration.load()
    args.mailbox = None
    if args.command != "dev" and not config.is_production:
        found = devenv.environment(config.local_dir)
        if found is not None:
            env, args.mailbox = found
            config = configuration.load(env)
    return config


# -- one-line errors: the cause and the next step ----------------------------------------------------
_MIGRATE = "run `verifyctl migrate` first"


def _sqlstate(exc: BaseException) -> str:
    fields = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
    return str(fields.get("C", ""))


def _server_message(exc: BaseException) -> str:
    fields = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
    return str(fields.get("M", "")) or type(exc).__name__


def explain_database_error(exc: DatabaseError) -> str:
    """A statement failed: a missing table or function means an unmigrated (or older) schema."""
    code, message = _sqlstate(exc), _server_message(exc)
    if code in ("42P01", "42883", "42703", "42704"):  # undefined table / function / column / object
        return f"the database schema is missing or older than this version ({message}): {_MIGRATE}"
    if code == "42501":
        return f"permission denied ({message}): run `verifyctl grant` as the owner, or connect as another user"
    return f"database error {code or '?'}: {message}"


def explain_unavailable(exc: UnavailableError, runtime: Runtime | None) -> str:
    """Which connection failure it was (refused, missing database, unknown role, bad password)."""
    where = _where(runtime)
    # The server's refusal may sit under pg8000's own failure to say goodbye on the closed socket
    # (a BrokenPipeError raised while handling it): look down the whole chain.
    chain = _chain(exc.__cause__)
    cause = next((e for e in chain if isinstance(e, DatabaseError) and _sqlstate(e)), chain[0] if chain else None)
    if isinstance(cause, DatabaseError) and _sqlstate(cause):
        code, message = _sqlstate(cause), _server_message(cause)
        if code == "3D000":
            return f"{message} on {where}: create it (createdb), or point DATABASE_URL at another database"
        if code == "28000":
            return f"{message} on {where}: create the role, or set the user in DATABASE_URL"
        if code == "28P01":
            return f"{message} on {where}: check the password in DATABASE_URL"
        if code.startswith("57P0") or code == "53300":
            return f"the database at {where} is not accepting connections ({message}): try again shortly"
        return f"cannot connect to the database at {where}: {message}"
    if isinstance(cause, (InterfaceError, OSError)):
        detail = cause.__cause__ or cause.__context__ or cause
        if isinstance(detail, (ConnectionRefusedError, FileNotFoundError)) or "connection" in str(cause).lower():
            return f"cannot connect to the database at {where}: is PostgreSQL running there? (check DATABASE_URL)"
        return f"cannot connect to the database at {where}: {type(detail).__name__}: {detail}"
    return str(exc)


def _chain(exc: BaseException | None) -> list[BaseException]:
    found: list[BaseException] = []
    while exc is not None and exc not in found:
        found.append(exc)
        exc = exc.__cause__ or exc.__context__
    return found


def _where(runtime: Runtime | None) -> str:
    params: ConnectionParams | None = getattr(runtime, "_params", None) if runtime is not None else None
    if params is None:
        return "the configured server"
    return params.unix_sock or f"{params.host}:{params.port}"


if __name__ == "__main__":
    sys.exit(main())
