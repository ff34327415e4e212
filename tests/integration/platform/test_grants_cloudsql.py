"""`verifyctl grant` under Cloud SQL's role model, on a private embedded PostgreSQL
playing the instance (tools/rehearsal_cloudsql.py, the rehearsal's own): cloudsqlsuperuser (NOLOGIN,
CREATEROLE, CREATEDB) owns the database; the migrator is an IAM-named login role that is only a
member of it; the functions' and the operators' IAM users have no privileges until the grant.

Its own server because roles belong to the whole cluster: the shared test server's
verification_app was made by a superuser, which is not the question asked here. ~3 s.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pg8000.native
import pytest

from signup_verification.platform import grants, migrations
from signup_verification.platform.database import ConnectionParams, Database

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tools"))
from rehearsal_cloudsql import Instance  # noqa: E402
from rehearsal_plan import DatabaseUser  # noqa: E402

MIGRATOR = "verify-migrator@p.iam"
WRITER, READER = "verify-create@p.iam", "verify-status@p.iam"
GROUP, MEMBER, OPERATOR = "oncall@example.com", "grace@example.com", "ada@example.com"


@pytest.fixture(scope="module")
def instance():
    server = Instance("p:europe-west1:verify-pg")
    users = [
        DatabaseUser(MIGRATOR, "CLOUD_IAM_SERVICE_ACCOUNT", ("cloudsqlsuperuser",)),
        DatabaseUser(WRITER, "CLOUD_IAM_SERVICE_ACCOUNT"),
        DatabaseUser(READER, "CLOUD_IAM_SERVICE_ACCOUNT"),
        DatabaseUser(GROUP, "CLOUD_IAM_GROUP"),
        DatabaseUser(OPERATOR, "CLOUD_IAM_USER"),
    ]
    try:
        server.create("verification", users, {GROUP: [MEMBER]})
        yield server
    finally:
        server.stop()


def login(instance: Instance, user: str) -> Database:
    return Database(ConnectionParams(user=user, database="verification", unix_sock=instance.socket))


@pytest.fixture(scope="module")
def granted(instance):
    """Migrated and granted as the grant job does, twice (every deploy runs both)."""
    db = login(instance, MIGRATOR)
    try:
        migrations.migrate(db)
        for _ in range(2):
            done = grants.grant(db, [WRITER], [READER, GROUP], [OPERATOR])
        assert done == [
            f"{WRITER}: verification_app",
            f"{READER}: verification_reader",
            f"{GROUP}: verification_reader",
            f"{OPERATOR}: verification_operator",
        ]
        db.execute_script("CREATE TABLE later_table (id int)")  # a later migration's table, no re-grant
        yield db
    finally:
        db.close()


def test_the_migrator_holds_no_role_attribute_of_its_own(instance):
    """The model the grant must work under: membership never passes CREATEROLE on."""
    con = instance.connect_as(MIGRATOR, "verification")
    try:
        with pytest.raises(pg8000.native.DatabaseError, match="permission denied to create role"):
            con.run("CREATE ROLE nobody NOLOGIN")
    finally:
        con.close()


def test_each_user_gets_its_roles_privileges_on_every_table_and_on_later_ones(instance, granted):
    writer, reader, member, operator = (login(instance, u) for u in (WRITER, READER, MEMBER, OPERATOR))
    try:
        for who in (writer, operator):
            who.run("DELETE FROM delivery_intents WHERE false")
            who.run("INSERT INTO later_table VALUES (1)")
        for who in (reader, member):  # the group's member reads through the group's role
            assert who.run("SELECT count(*) FROM later_table") == [[2]]
            with pytest.raises(pg8000.native.DatabaseError, match="permission denied for table delivery_intents"):
                who.run("DELETE FROM delivery_intents WHERE false")
    finally:
        for who in (writer, reader, member, operator):
            who.close()


def test_the_roles_belong_to_cloudsqlsuperuser_and_the_defaults_to_the_tables_owner(instance, granted):
    """Roles made under SET ROLE cloudsqlsuperuser (it holds their ADMIN OPTION); default privileges
    set by the role that owns the tables, so a later migration's tables need no re-grant."""
    rows = granted.rows(
        "SELECT r.rolname AS role, g.rolname AS grantor FROM pg_auth_members m "
        "JOIN pg_roles r ON r.oid = m.roleid JOIN pg_roles g ON g.oid = m.grantor "
        "JOIN pg_roles u ON u.oid = m.member WHERE u.rolname = :user",
        user=OPERATOR,
    )
    assert rows == [{"role": "verification_operator", "grantor": "cloudsqlsuperuser"}]
    owners = granted.run(
        "SELECT DISTINCT pg_get_userbyid(d.defaclrole), (SELECT DISTINCT tableowner FROM pg_tables "
        "WHERE schemaname = 'public') FROM pg_default_acl d"
    )
    assert owners == [[MIGRATOR, MIGRATOR]]


def test_a_stopped_instance_leaves_no_server_running():
    # it runs as another user, outside any test folder: nothing else would ever stop it
    server = Instance("p:europe-west1:stopped")
    pid = int((server.data_dir / "postmaster.pid").read_text(encoding="utf-8").split("\n", 1)[0])
    server.stop()
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid) and not server.home.exists()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
