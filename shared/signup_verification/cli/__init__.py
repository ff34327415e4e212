"""verifyctl: the operator's command line. Errors are one line on stderr and exit status 1.

Exit status: 0 done; 1 an error (one line on stderr, naming the cause and the next step); 2 a usage
error (argparse); 3 `status --check` found an alert condition; 130 interrupted.

The commands live in cli/commands/ (one module per area, each declaring its own options), the
parser in parser.py, the one-line explanations of database failures in errors.py.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from .. import config as configuration
from ..platform.database import DatabaseError, UnavailableError
from ..platform.errors import ConfigError
from ..runtime import Runtime
from .commands.observe import EXIT_ALERT
from .errors import explain_database_error, explain_unavailable
from .parser import build_parser

__all__ = ["EXIT_ALERT", "build_parser", "explain_database_error", "explain_unavailable", "main"]


def main(argv: list[str] | None = None, *, fault: Callable[[str], None] | None = None) -> int:
    """`fault`: a dispatch fault hook, for tools/fault_dispatch.py only (refused in production)."""
    args = build_parser().parse_args(argv)
    args.fault = fault
    runtime: Runtime | None = None
    try:
        runtime = Runtime(_load(args), application_name="verifyctl")
        _say_where_the_database_is(args, runtime.config)
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
    """The configuration; outside production and beside a running `verifyctl dev` (same local dir),
    with its transports and database under the environment's own settings (local/devenv.py). In
    production the laptop emulation is never imported: the deploy bundle does not ship it."""
    config = configuration.load()
    args.mailbox = None
    if args.command != "dev" and not config.is_production:
        from ..local import devenv, place

        found = devenv.environment(config.local_dir)
        if found is not None:
            env, args.mailbox = found
            config = configuration.load(env)
            _say(place.dev_note(config, devenv.running(config.local_dir)))
    return config


def _say_where_the_database_is(args: argparse.Namespace, config: configuration.Config) -> None:
    """Without DATABASE_URL a command uses the embedded server of the local dir (local/place.py): say
    so when it starts one, refuse when there is none to use."""
    database = config.database
    if not args.database or config.is_production or database.url or database.instance_connection_name:
        return
    from ..local import place

    _say(place.embedded_note(config, args.command))


def _say(note: str | None) -> None:
    if note:
        print(f"verifyctl: {note}", file=sys.stderr, flush=True)
