"""Database privileges for the functions' IAM users, applied after every migration run.

Cloud SQL creates IAM database users with no privileges. Two NOLOGIN group roles carry them:
`verification_app` (read and write the service's tables) and `verification_reader` (read only,
for the operator status function). Each function's IAM user is made a member of one of them.
Run by `verifyctl grant` as the migrating identity (a `cloudsqlsuperuser` member, which owns the
tables); every statement is idempotent, so deploy.sh runs it on every deploy.
"""
from __future__ import annotations

import re

from .database import Database

APP_ROLE = "verification_app"
READER_ROLE = "verification_reader"
# IAM database user names: `sa@project.iam` or a person's email; PostgreSQL identifiers end at 63 bytes.
_USER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9@._+-]{0,62}$")


def quote_identifier(name: str) -> str:
    if not _USER.match(name):
        raise ValueError(f"not a valid database user name: {name!r}")
    return '"' + name.replace('"', '""') + '"'


def _ensure_role(db: Database, role: str) -> None:
    if not db.run("SELECT 1 FROM pg_roles WHERE rolname = :r", r=role):
        db.execute_script(f"CREATE ROLE {quote_identifier(role)} NOLOGIN")


def ensure_roles(db: Database) -> None:
    """Both group roles with privileges on every current table and sequence, and on future ones."""
    app, reader = quote_identifier(APP_ROLE), quote_identifier(READER_ROLE)
    _ensure_role(db, APP_ROLE)
    _ensure_role(db, READER_ROLE)
    db.execute_script(
        f"GRANT USAGE ON SCHEMA public TO {app}, {reader};"
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {app};"
        f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {app};"
        f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {reader};"
        # Tables a later migration creates (as this same identity) are covered without a re-run.
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {app};"
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO {app};"
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO {reader};")


def grant(db: Database, writers: list[str], readers: list[str]) -> list[str]:
    """Create/refresh the group roles and add each user to one; returns what was granted."""
    missing = [u for u in [*writers, *readers]
               if not db.run("SELECT 1 FROM pg_roles WHERE rolname = :u", u=u)]
    if missing:
        raise RuntimeError(f"database user(s) not found (terraform creates them): {', '.join(missing)}")
    done = []
    with db.transaction():
        ensure_roles(db)
        for role, users in ((APP_ROLE, writers), (READER_ROLE, readers)):
            for user in users:
                db.execute_script(f"GRANT {quote_identifier(role)} TO {quote_identifier(user)}")
                done.append(f"{user}: {role}")
    return done
