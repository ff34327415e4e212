"""One Cloud SQL for PostgreSQL instance, emulated on a private embedded PostgreSQL with Cloud SQL's
role model, as the plan's google_sql_database and google_sql_user resources make it
(the rehearsal's, tools/rehearse_deploy.py):

- `cloudsqlsuperuser`: NOLOGIN, CREATEROLE, CREATEDB, not a superuser; it owns every database the
  API creates (and so, through pg_database_owner, its public schema);
- a CLOUD_IAM_SERVICE_ACCOUNT or CLOUD_IAM_USER user: a LOGIN role named as the plan names it, with
  no attribute of its own, a member of its `database_roles` and of nothing else;
- a CLOUD_IAM_GROUP user: a NOLOGIN role; a member of the group who logs in gets a LOGIN role named
  by her email, a member of the group's role (Cloud SQL makes it at her first login; here, when the
  instance is set up, for the members the rehearsal names).

Not emulated: IAM login itself (the token that proves who connects). The server trusts its unix
socket; the connector's stand-in (rehearsal_connector.py) dials as the user it is asked for, which
the real connector can do only with that principal's credentials.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

import pg8000.native

from rehearsal_plan import DatabaseUser
from signup_verification.local import embedded

RUNTIME = Path(__file__).resolve().parents[1] / ".local" / "run"
SUPERUSER_ROLE = "cloudsqlsuperuser"
LOGIN_TYPES = {"CLOUD_IAM_SERVICE_ACCOUNT", "CLOUD_IAM_USER"}
GROUP_TYPE = "CLOUD_IAM_GROUP"


def identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class Instance:
    """A private embedded PostgreSQL playing the Cloud SQL instance `connection_name`.

    Its data directory is a new temporary directory of its own: PostgreSQL runs as the `pgserver`
    system user (when we are root), which must reach it, and a pytest session elsewhere on the
    machine may close pytest's shared temporary root to other users at any time."""

    def __init__(self, connection_name: str, ip_types: tuple[str, ...] = ("public",)):
        current = os.environ.get("XDG_RUNTIME_DIR")
        if not current or not Path(current).is_dir() or Path(current).stat().st_mode & 0o077:
            # pgserver's lock (local/embedded.py): in the checkout's .local, not beside the data, which
            # goes when the instance stops
            RUNTIME.mkdir(parents=True, exist_ok=True)
            RUNTIME.chmod(0o700)
            os.environ["XDG_RUNTIME_DIR"] = str(RUNTIME)
        self.home = Path(tempfile.mkdtemp(prefix="cloudsql-"))
        self.data_dir = self.home / "pg"
        self.connection_name = connection_name
        self.ip_types = ip_types
        self.admin = embedded.start(
            self.data_dir, stop_at_exit=False, settings={"fsync": "off", "synchronous_commit": "off"}
        )  # the built-in superuser: Cloud SQL's own, which no client of the instance ever is
        if self.admin.unix_sock is None:
            raise RuntimeError("the embedded PostgreSQL gave no unix socket")
        self.socket = self.admin.unix_sock

    def connect_as(self, user: str, database: str = "postgres") -> pg8000.native.Connection:
        return pg8000.native.Connection(user, unix_sock=self.socket, database=database)

    def _admin_run(self, *statements: str) -> None:
        con = self.connect_as(self.admin.user)
        try:
            for statement in statements:
                con.run(statement)
        finally:
            con.close()

    def create(self, database: str, users: Iterable[DatabaseUser], group_members: dict[str, list[str]]) -> None:
        """The database and the users as Cloud SQL creates them (module docstring)."""
        statements = [
            f"CREATE ROLE {SUPERUSER_ROLE} NOLOGIN CREATEROLE CREATEDB",
            f"CREATE DATABASE {identifier(database)} OWNER {SUPERUSER_ROLE}",
        ]
        for user in users:
            if user.type in LOGIN_TYPES:
                statements.append(f"CREATE ROLE {identifier(user.name)} LOGIN")
            elif user.type == GROUP_TYPE:
                statements.append(f"CREATE ROLE {identifier(user.name)} NOLOGIN")
                for member in group_members.get(user.name, []):
                    statements.append(f"CREATE ROLE {identifier(member)} LOGIN IN ROLE {identifier(user.name)}")
            else:
                raise ValueError(f"google_sql_user {user.name}: type {user.type} is not an IAM user")
            statements += [f"GRANT {identifier(r)} TO {identifier(user.name)}" for r in user.database_roles]
        self._admin_run(*statements)

    def sessions(self, database: str) -> list[tuple[str, str]]:
        """(user, application_name) of each client session open on `database`."""
        con = self.connect_as(self.admin.user)
        try:
            rows = con.run(
                "SELECT usename, application_name FROM pg_stat_activity WHERE datname = :name AND pid <> pg_backend_pid()",
                name=database,
            )
        finally:
            con.close()
        return [(row[0], row[1]) for row in rows]

    def connector_setting(self, log: Path) -> str:
        """REHEARSAL_CLOUDSQL for the processes that reach this instance (rehearsal_connector.py)."""
        return json.dumps(
            {"instance": self.connection_name, "ip_types": list(self.ip_types), "socket": self.socket, "log": str(log)}
        )

    def stop(self) -> None:
        embedded.stop(self.data_dir)
        shutil.rmtree(self.home, ignore_errors=True)
