"""verifyctl: the operator's command line. Errors are one line on stderr and exit status 1."""
from __future__ import annotations

import argparse
import sys

from . import migrations
from .database import Database
from .runtime import database_params
from .settings import ConfigError, Settings


def _database(settings: Settings) -> Database:
    return Database(database_params(settings), application_name="verifyctl")


def cmd_migrate(args: argparse.Namespace, settings: Settings) -> int:
    applied = migrations.migrate(_database(settings))
    print(f"applied {len(applied)} migration(s): {', '.join(applied)}" if applied else "database is up to date")
    return 0


def cmd_new_key(args: argparse.Namespace, settings: Settings) -> int:
    from .tokens import new_key_spec

    print(new_key_spec(args.key_id))
    return 0


def cmd_dev(args: argparse.Namespace, settings: Settings) -> int:
    from .local import devserver

    return devserver.run(settings, args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="verifyctl", description="Signup verification delivery: operator commands.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("migrate", help="apply pending SQL migrations").set_defaults(func=cmd_migrate)
    key = sub.add_parser("new-key", help="print a fresh TOKEN_KEYS entry")
    key.add_argument("--key-id", default=None)
    key.set_defaults(func=cmd_new_key)
    dev = sub.add_parser("dev", help="run the whole service locally on embedded PostgreSQL")
    dev.add_argument("--host", default="127.0.0.1")
    dev.add_argument("--base-port", type=int, default=8081)
    dev.set_defaults(func=cmd_dev)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = Settings.from_env()
        return args.func(args, settings)
    except (ConfigError, ValueError, RuntimeError) as exc:
        print(f"verifyctl: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
