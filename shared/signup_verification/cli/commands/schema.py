"""The database and the keys: `migrate`, `grant`, `new-key`."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ...runtime import Runtime
from . import add_command, plain


def cmd_migrate(args: argparse.Namespace, runtime: Runtime) -> int:
    from ...platform import migrations

    config, db = runtime.config.migrations, runtime.db  # closed with the runtime
    if args.list:
        listing = migrations.status(db, config=config)
        print(json.dumps(plain(listing), indent=2) if args.json else listing.render())
    else:
        result = migrations.migrate(db, config=config)
        print(json.dumps(plain(result)) if args.json else result.summary())
    return 0


def cmd_grant(args: argparse.Namespace, runtime: Runtime) -> int:
    from ...platform import grants as db_access

    granted = list(db_access.grant(runtime.db, args.writer, args.reader, args.operator))
    if args.json:
        print(json.dumps({"granted": granted}))
    for line in [] if args.json else granted:
        print(f"granted {line}")
    return 0


def cmd_new_key(args: argparse.Namespace, runtime: Runtime) -> int:
    from ...verifications.tokens import new_key_spec

    spec = new_key_spec(args.key_id)
    print(json.dumps({"token_keys_entry": spec}) if args.json else spec)
    return 0


def add_migrate(sub: Any) -> None:
    migrate = add_command(
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


def add_grant(sub: Any) -> None:
    grant = add_command(
        sub,
        "grant",
        "give the functions' and the operators' database users their privileges (after migrate)",
        "Create the group roles and add each named database user to one (terraform creates the users; "
        "the grant job passes them). Run as the identity that ran the migrations, the tables' owner.",
        cmd_grant,
    )
    grant.add_argument("--writer", action="append", default=[], help="database user that reads and writes")
    grant.add_argument("--reader", action="append", default=[], help="database user that only reads")
    grant.add_argument(
        "--operator",
        action="append",
        default=[],
        help="database user of an operator: reads, and acts as the functions do",
    )


def add_new_key(sub: Any) -> None:
    key = add_command(
        sub,
        "new-key",
        "print a fresh TOKEN_KEYS entry",
        "Print a new key_id:secret entry to prepend to TOKEN_KEYS (the first entry signs, every entry verifies).",
        cmd_new_key,
        database=False,
    )
    key.add_argument("--key-id", default=None)
