"""Cloud SQL connector wiring and the functions' database privileges, against the real (embedded)
PostgreSQL. The connector itself needs Google; a stand-in at the seam dials the local server the
way the connector's pg8000 driver does (a pg8000 DB-API connection), so everything after the
socket is the production path."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pg8000.dbapi
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from signup_verification import runtime
from signup_verification.platform import cloudsql
from signup_verification.platform import grants as db_access
from signup_verification.platform.config import DatabaseConfig
from signup_verification.platform.database import ConnectionParams, Database, UnavailableError
from signup_verification.platform.errors import ConfigError
from signup_verification.platform.settings import SETTING

INSTANCE = "my-proj:europe-west1:verify-pg"


class LocalConnector:
    """Stands in for google.cloud.sql.connector.Connector: same call, a local server behind it."""

    def __init__(self, target: ConnectionParams, fail: Exception | None = None):
        self.target = target
        self.fail = fail
        self.calls: list[tuple[str, str, dict]] = []
        self.closed = False

    def connect(self, instance: str, driver: str, **kwargs):
        self.calls.append((instance, driver, kwargs))
        if self.fail:
            raise self.fail
        return pg8000.dbapi.connect(
            self.target.user,
            database=kwargs["db"],
            unix_sock=self.target.unix_sock,
            host=self.target.host or "localhost",
            port=self.target.port,
            password=self.target.password,
            application_name=kwargs["application_name"],
        )

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def local_connector(database_url):
    params = ConnectionParams.from_url(database_url)
    connector = LocalConnector(params)
    previous = cloudsql.use_factory(lambda: connector)
    yield connector
    cloudsql.use_factory(previous)


def settings_for(database: str, **overrides) -> DatabaseConfig:
    values = {
        "instance_connection_name": INSTANCE,
        "user": "verify-create@my-proj.iam.gserviceaccount.com",
        "name": database,
        "production": True,
        **overrides,
    }
    return DatabaseConfig(**values)


def test_without_instance_connection_name_there_is_no_connector():
    assert cloudsql.connector_for(DatabaseConfig(url="postgresql://u@h/d"), "x") is None


def test_database_runs_through_the_connector_with_iam_auth(local_connector, database_url):
    database = ConnectionParams.from_url(database_url).database
    db = Database(
        cloudsql.connection_params(settings_for(database)),
        connector=cloudsql.connector_for(settings_for(database), "signup-verification:test"),
    )
    try:
        with db.transaction():
            db.run("CREATE TEMP TABLE probe (n int)")
            db.run("INSERT INTO probe VALUES (:n)", n=7)
        assert db.rows("SELECT n, current_setting('application_name') AS app FROM probe") == [
            {"n": 7, "app": "signup-verification:test"}
        ]
        assert db.run("SHOW TIME ZONE") == [["UTC"]]  # the session set-up ran on the connector's socket
    finally:
        db.close()
    instance, driver, kwargs = local_connector.calls[0]
    assert (instance, driver) == (INSTANCE, "pg8000")
    assert kwargs["enable_iam_auth"] is True
    assert kwargs["user"] == "verify-create@my-proj.iam.gserviceaccount.com"  # the connector trims the suffix
    assert kwargs["db"] == database
    assert kwargs["ip_type"] == "public"  # the default: the instance's connector-only public IP


def test_a_dropped_connection_is_reopened_through_the_connector(local_connector, database_url, pg_server):
    database = ConnectionParams.from_url(database_url).database
    db = Database(
        cloudsql.connection_params(settings_for(database)),
        connector=cloudsql.connector_for(settings_for(database), "victim"),
    )
    try:
        pid = db.run("SELECT pg_backend_pid()")[0][0]
        admin = pg_server.with_database("postgres").connect()
        admin.run("SELECT pg_terminate_backend(:p)", p=pid)
        admin.close()
        with pytest.raises(UnavailableError):
            db.run("SELECT 1")
        assert db.run("SELECT 1") == [[1]]
    finally:
        db.close()
    assert len(local_connector.calls) == 2


def test_connector_failure_is_database_unavailable(database_url):
    class AdminApiDown(Exception):
        pass

    connector = LocalConnector(ConnectionParams.from_url(database_url), fail=AdminApiDown("403 from sqladmin"))
    previous = cloudsql.use_factory(lambda: connector)
    try:
        db = Database(
            cloudsql.connection_params(settings_for("verification")),
            connector=cloudsql.connector_for(settings_for("verification"), "x"),
        )
        with pytest.raises(UnavailableError, match="cannot connect to the database: ConnectionError"):
            db.run("SELECT 1")
    finally:
        cloudsql.use_factory(previous)


def test_runtime_uses_the_connector_when_instance_connection_name_is_set(
    service_env, local_connector, monkeypatch, database_url
):
    monkeypatch.delenv("DATABASE_URL")
    monkeypatch.setenv("INSTANCE_CONNECTION_NAME", INSTANCE)
    monkeypatch.setenv("DB_USER", "verify-dispatch@my-proj.iam.gserviceaccount.com")
    monkeypatch.setenv("DB_NAME", ConnectionParams.from_url(database_url).database)
    monkeypatch.setenv("DB_IP_TYPE", "private")  # what infra sets with db_connectivity = "private_ip"
    runtime.reset()
    assert runtime.get_runtime().db.run("SELECT count(*) FROM verifications") == [[0]]
    assert local_connector.calls[0][2]["user"] == "verify-dispatch@my-proj.iam.gserviceaccount.com"
    assert local_connector.calls[0][2]["ip_type"] == "private"


def test_every_ip_type_the_setting_allows_is_one_the_real_connector_dials():
    """DB_IP_TYPE's words go to Connector.connect(ip_type=...) as they are: the connector must know them."""
    from google.cloud.sql.connector.enums import IPTypes

    field = next(f for f in dataclasses.fields(DatabaseConfig) if f.name == "ip_type")
    allowed = field.metadata[SETTING].choices
    assert {IPTypes._from_str(word) for word in allowed} == {IPTypes.PUBLIC, IPTypes.PRIVATE}


def test_an_unknown_ip_type_is_refused_at_start(service_env, monkeypatch):
    monkeypatch.setenv("INSTANCE_CONNECTION_NAME", INSTANCE)
    monkeypatch.setenv("DB_USER", "verify-dispatch@my-proj.iam.gserviceaccount.com")
    monkeypatch.setenv("DB_IP_TYPE", "psc-please")
    runtime.reset()
    with pytest.raises(ConfigError, match="DB_IP_TYPE"):
        runtime.get_runtime()


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"user": None}, "DB_USER"),
        ({"instance_connection_name": "verify-pg"}, "INSTANCE_CONNECTION_NAME must look like project:region:instance"),
    ],
)
def test_incomplete_connector_settings_are_config_errors(overrides, message):
    with pytest.raises(ConfigError, match=message):
        cloudsql.connector_for(settings_for("verification", **overrides), "x")


def test_default_factory_builds_a_lazy_iam_connector(tmp_path: Path, monkeypatch):
    """The real Connector, with a throwaway service-account key (nothing is dialled)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    credentials = tmp_path / "sa.json"
    credentials.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "my-proj",
                "private_key_id": "k1",
                "private_key": pem,
                "client_email": "deployer@my-proj.iam.gserviceaccount.com",
                "client_id": "1",
                "token_uri": "https://oauth2.googleapis.com/token",
            }
        )
    )
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(credentials))
    from google.cloud.sql.connector import Connector
    from google.cloud.sql.connector.enums import RefreshStrategy

    connector = cloudsql.default_factory()
    try:
        assert isinstance(connector, Connector)
        assert connector._refresh_strategy == RefreshStrategy.LAZY
        assert connector._enable_iam_auth is True
    finally:
        connector.close()


# ---- the functions' privileges (verifyctl grant) ------------------------------------------


def _login(pg_server: ConnectionParams, database: str, user: str) -> Database:
    params = pg_server.with_database(database)
    return Database(
        ConnectionParams(user=user, database=database, host=params.host, port=params.port, unix_sock=params.unix_sock)
    )


def test_writers_read_and_write_readers_only_read(db, pg_server, database_url):
    database = ConnectionParams.from_url(database_url).database
    for user in ("fn-create@p.iam", "fn-status@p.iam"):
        db.execute_script(
            f"DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{user}') "
            f'THEN CREATE ROLE "{user}" LOGIN; END IF; END $$'
        )
    assert db_access.grant(db, ["fn-create@p.iam"], ["fn-status@p.iam"]) == [
        "fn-create@p.iam: verification_app",
        "fn-status@p.iam: verification_reader",
    ]
    db_access.grant(db, ["fn-create@p.iam"], ["fn-status@p.iam"])  # idempotent: every deploy runs it

    writer = _login(pg_server, database, "fn-create@p.iam")
    reader = _login(pg_server, database, "fn-status@p.iam")
    try:
        writer.run("DELETE FROM delivery_intents WHERE false")
        assert reader.run("SELECT count(*) FROM delivery_intents") == [[0]]
        with pytest.raises(pg8000.dbapi.DatabaseError, match="permission denied"):
            reader.run("DELETE FROM delivery_intents WHERE false")
        # A table from a later migration is covered without re-running grant.
        db.execute_script("CREATE TABLE later_table (id int)")
        writer.run("INSERT INTO later_table VALUES (1)")
        assert reader.run("SELECT id FROM later_table") == [[1]]
    finally:
        writer.close()
        reader.close()


def test_grant_refuses_users_that_do_not_exist(db):
    with pytest.raises(RuntimeError, match="database user\\(s\\) not found .*: ghost@p.iam"):
        db_access.grant(db, ["ghost@p.iam"], [])


def test_grant_refuses_a_malformed_user_name(db):
    with pytest.raises(ValueError, match="not a valid database user name"):
        db_access.quote_identifier('x"; DROP TABLE verifications; --')


def test_verifyctl_migrate_and_grant_run_through_the_connector(local_connector, database_url, monkeypatch, capsys, db):
    """What the migrate and grant Cloud Run jobs run (infra/migrations.tf): INSTANCE_CONNECTION_NAME +
    DB_USER (the migrator), no DATABASE_URL."""
    from signup_verification import cli

    db.execute_script(
        "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'fn-cli@p.iam') "
        'THEN CREATE ROLE "fn-cli@p.iam" LOGIN; END IF; END $$'
    )
    for name in ("DATABASE_URL", "TOKEN_KEYS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ENVIRONMENT", "production")
    monkeypatch.setenv("INSTANCE_CONNECTION_NAME", INSTANCE)
    monkeypatch.setenv("DB_USER", "deployer@example.com")
    monkeypatch.setenv("DB_NAME", ConnectionParams.from_url(database_url).database)
    assert cli.main(["migrate"]) == 0
    assert cli.main(["grant", "--writer", "fn-cli@p.iam"]) == 0
    out = capsys.readouterr().out
    assert "database is up to date" in out and "granted fn-cli@p.iam: verification_app" in out
    assert {call[2]["user"] for call in local_connector.calls} == {"deployer@example.com"}


def test_verifyctl_reports_a_missing_db_user_in_one_line(monkeypatch, capsys):
    from signup_verification import cli

    monkeypatch.setenv("INSTANCE_CONNECTION_NAME", INSTANCE)
    monkeypatch.delenv("DB_USER", raising=False)
    assert cli.main(["migrate"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("verifyctl: DB_USER") and len(err.splitlines()) == 1
