"""Database privileges for the functions' and the operators' IAM users, applied after every migration run.

Cloud SQL creates IAM database users with no privileges. Three NOLOGIN group roles carry them:
`verification_app` (read and write the service's tables: the writing functions),
`verification_reader` (read only: the status function, and operators who only look) and
`verification_operator` (an operator's verifyctl: the functions' own privileges, through
verification_app). Each user named is made a member of one of them.

Run by `verifyctl grant` (the grant job, infra/migrations.tf) as the migrating identity, which owns
every table. On Cloud SQL that identity is a member of `cloudsqlsuperuser` without its CREATEROLE
(membership never passes a role attribute), so the roles and memberships are made under
`SET ROLE cloudsqlsuperuser` (platform/queries/grants.sql:grants_admin decides), and the table privileges and default
privileges by the session's own role, the tables' owner, so that a table a later migration creates
is covered with no re-grant. Every statement is idempotent: deploy.sh runs it on every deploy.
"""

from __future__ import annotations

import re

from .catalogue import catalogue
from .database import Database

_SQL = catalogue("platform")
_MEMBER = _SQL["grants_member"]
_MISSING_USERS = _SQL["grants_missing_users"]
_ADMIN = _SQL["grants_admin"]
_SET_ROLE = _SQL["grants_set_role"]
_ROLES = _SQL["grants_roles"]
_RESET_ROLE = _SQL["grants_reset_role"]
_PRIVILEGES = _SQL["grants_privileges"]

# Named in the grants_roles and grants_privileges statements too (static text: ours, not input).
APP_ROLE = "verification_app"
READER_ROLE = "verification_reader"
OPERATOR_ROLE = "verification_operator"
# IAM database user names: `sa@project.iam` or a person's or group's email; PostgreSQL identifiers end at 63 bytes.
_USER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9@._+-]{0,62}$")


def quote_identifier(name: str) -> str:
    if not _USER.match(name):
        raise ValueError(f"not a valid database user name: {name!r}")
    return '"' + name.replace('"', '""') + '"'


def grant(
    db: Database, writers: list[str], readers: list[str], operators: list[str] | tuple[str, ...] = ()
) -> list[str]:
    """Create/refresh the group roles and add each user to one; returns what was granted."""
    member = _MEMBER
    memberships = [
        (user, role, member.format(role=quote_identifier(role), member=quote_identifier(user)))
        for role, users in ((APP_ROLE, writers), (READER_ROLE, readers), (OPERATOR_ROLE, operators))
        for user in users
    ]
    named = [*writers, *readers, *operators]
    missing = [row[0] for row in db.run(_MISSING_USERS, users=named)]
    if missing:
        raise RuntimeError(f"database user(s) not found (terraform creates them): {', '.join(missing)}")
    done = []
    with db.transaction():
        admin = db.single(_ADMIN)["admin"]
        if admin:
            db.execute_script(_SET_ROLE.format(role=quote_identifier(admin)))
        db.execute_script(_ROLES)
        for user, role, statement in memberships:
            db.execute_script(statement)
            done.append(f"{user}: {role}")
        db.execute_script(_RESET_ROLE)
        db.execute_script(_PRIVILEGES)
    return done
