"""Database privileges for the functions' IAM users, applied after every migration run.

Cloud SQL creates IAM database users with no privileges. Two NOLOGIN group roles carry them:
`verification_app` (read and write the service's tables) and `verification_reader` (read only,
for the operator status function). Each function's IAM user is made a member of one of them.
Run by `verifyctl grant` as the migrating identity (a `cloudsqlsuperuser` member, which owns the
tables); every statement is idempotent, so deploy.sh runs it on every deploy.
"""

from __future__ import annotations

import re

from .database import Database, load_sql

# Named in grants_roles.sql too (a static file: these are ours, not input).
APP_ROLE = "verification_app"
READER_ROLE = "verification_reader"
# IAM database user names: `sa@project.iam` or a person's email; PostgreSQL identifiers end at 63 bytes.
_USER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9@._+-]{0,62}$")


def quote_identifier(name: str) -> str:
    if not _USER.match(name):
        raise ValueError(f"not a valid database user name: {name!r}")
    return '"' + name.replace('"', '""') + '"'


def ensure_roles(db: Database) -> None:
    """Both group roles with privileges on every current table and sequence, and on future ones."""
    db.execute_script(load_sql(__file__, "grants_roles.sql"))


def grant(db: Database, writers: list[str], readers: list[str]) -> list[str]:
    """Create/refresh the group roles and add each user to one; returns what was granted."""
    member = load_sql(__file__, "grants_member.sql")
    statements = [
        (user, role, member.format(role=quote_identifier(role), member=quote_identifier(user)))
        for role, users in ((APP_ROLE, writers), (READER_ROLE, readers))
        for user in users
    ]
    missing = [row[0] for row in db.run(load_sql(__file__, "grants_missing_users.sql"), users=[*writers, *readers])]
    if missing:
        raise RuntimeError(f"database user(s) not found (terraform creates them): {', '.join(missing)}")
    done = []
    with db.transaction():
        ensure_roles(db)
        for user, role, statement in statements:
            db.execute_script(statement)
            done.append(f"{user}: {role}")
    return done
