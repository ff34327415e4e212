"""The migration runner and `verifyctl migrate` against fresh, empty databases on the real server."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from signup_verification import cli
from signup_verification.platform import migrations
from signup_verification.platform.database import ConnectionParams, Database
from signup_verification.platform.migrations import MIGRATION_LOCK_KEY, MigrationError


@pytest.fixture
def empty_url(pg_server: ConnectionParams) -> str:
    name = f"m_{uuid.uuid4().hex[:16]}"
    admin = pg_server.with_database("postgres").connect()
    admin.run(f'CREATE DATABASE "{name}"')
    try:
        yield pg_server.with_database(name).url()
    finally:
        admin.run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@pytest.fixture
def empty_db(empty_url: str) -> Database:
    db = Database.from_url(empty_url)
    yield db
    db.close()


@pytest.fixture
def sql_dir(tmp_path: Path) -> Path:
    """Migrations that log their own execution, named so that a name sort would misorder them."""
    folder = tmp_path / "sql"
    folder.mkdir()
    write(folder, "001_log.sql", "CREATE TABLE log (n serial PRIMARY KEY, version text NOT NULL);"
                                 " INSERT INTO log (version) VALUES ('001');")
    write(folder, "002_table.sql", "CREATE TABLE t (a int); INSERT INTO log (version) VALUES ('002');")
    write(folder, "999_column.sql", "ALTER TABLE t ADD COLUMN b int; INSERT INTO log (version) VALUES ('999');")
    write(folder, "1000_row.sql", "INSERT INTO t (a, b) VALUES (1, 2); INSERT INTO log (version) VALUES ('1000');")
    (folder / "README.md").write_text("not a migration")
    return folder


def write(folder: Path, name: str, sql: str) -> Path:
    path = folder / name
    path.write_text(sql)
    return path


def log(db: Database) -> list[str]:
    return [r[0] for r in db.run("SELECT version FROM log ORDER BY n")]


def lock_is_free(url: str) -> bool:
    other = Database.from_url(url)
    try:
        free = other.run("SELECT pg_try_advisory_lock(:k)", k=MIGRATION_LOCK_KEY)[0][0]
        other.run("SELECT pg_advisory_unlock_all()")
        return free
    finally:
        other.close()


# -- the runner ---------------------------------------------------------------------------------------

def test_the_project_migrations_apply_to_an_empty_database_and_record_their_versions(empty_db):
    expected = migrations.discover()
    assert migrations.migrate(empty_db) == [m.version for m in expected]
    recorded = empty_db.run("SELECT version, name, checksum FROM schema_migrations ORDER BY version")
    assert recorded == [[m.version, m.name, m.checksum] for m in expected]
    assert empty_db.run("SELECT to_regclass('delivery_intents') IS NOT NULL")[0][0]
    assert migrations.migrate(empty_db) == []


def test_migrations_apply_in_numeric_order_and_a_second_run_does_nothing(empty_db, sql_dir):
    assert migrations.migrate(empty_db, sql_dir) == ["001", "002", "999", "1000"]
    assert log(empty_db) == ["001", "002", "999", "1000"]
    applied_at = empty_db.run("SELECT version, applied_at FROM schema_migrations ORDER BY version")
    assert migrations.migrate(empty_db, sql_dir) == []
    assert log(empty_db) == ["001", "002", "999", "1000"]  # nothing ran twice
    assert empty_db.run("SELECT version, applied_at FROM schema_migrations ORDER BY version") == applied_at


def test_a_new_file_is_applied_on_the_next_run(empty_db, sql_dir):
    migrations.migrate(empty_db, sql_dir)
    write(sql_dir, "1001_more.sql", "INSERT INTO log (version) VALUES ('1001');")
    assert migrations.migrate(empty_db, sql_dir) == ["1001"]


def test_concurrent_runs_do_not_race(empty_url, sql_dir):
    write(sql_dir, "002_table.sql", "SELECT pg_sleep(0.3); CREATE TABLE t (a int);"
                                    " INSERT INTO log (version) VALUES ('002');")
    barrier, results, errors = threading.Barrier(4), [], []

    def run() -> None:
        db = Database.from_url(empty_url)
        try:
            barrier.wait()
            results.append(migrations.migrate(db, sql_dir))
        except Exception as exc:  # collected: the assertion below reports it
            errors.append(exc)
        finally:
            db.close()

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert sorted(results, key=len) == [[], [], [], ["001", "002", "999", "1000"]]
    db = Database.from_url(empty_url)
    assert log(db) == ["001", "002", "999", "1000"]
    db.close()


def test_a_changed_applied_migration_is_refused_and_nothing_after_it_runs(empty_db, sql_dir, empty_url):
    migrations.migrate(empty_db, sql_dir)
    write(sql_dir, "002_table.sql", "CREATE TABLE t (a bigint); INSERT INTO log (version) VALUES ('002');")
    write(sql_dir, "1001_more.sql", "INSERT INTO log (version) VALUES ('1001');")
    with pytest.raises(MigrationError, match="002_table.sql changed after it was applied"):
        migrations.migrate(empty_db, sql_dir)
    assert log(empty_db) == ["001", "002", "999", "1000"]
    assert lock_is_free(empty_url)


def test_a_failing_migration_leaves_no_trace_and_can_be_fixed(empty_db, sql_dir, empty_url):
    write(sql_dir, "1001_bad.sql", "CREATE TABLE half (x int); INSERT INTO log (version) VALUES ('1001');"
                                   " SELECT no_such_column FROM t;")
    with pytest.raises(MigrationError, match=r"1001_bad.sql failed: .*no_such_column"):
        migrations.migrate(empty_db, sql_dir)
    assert log(empty_db) == ["001", "002", "999", "1000"]  # the earlier ones stay applied
    assert empty_db.run("SELECT to_regclass('half')")[0][0] is None
    assert lock_is_free(empty_url)
    write(sql_dir, "1001_bad.sql", "CREATE TABLE half (x int); INSERT INTO log (version) VALUES ('1001');")
    assert migrations.migrate(empty_db, sql_dir) == ["1001"]


@pytest.mark.parametrize("names, message", [
    (["001_ok.sql", "2_short.sql"], "001_name.sql"),
    (["001_ok.sql", "002-dash.sql"], "001_name.sql"),
    (["001_ok.sql", "002_Upper.sql"], "001_name.sql"),
    (["001_a.sql", "001_b.sql"], "share a version"),
    (["001_a.sql", "0001_b.sql"], "share a version"),
])
def test_badly_named_or_duplicate_migrations_are_refused_before_anything_runs(tmp_path, names, message):
    for name in names:
        write(tmp_path, name, "SELECT 1;")
    with pytest.raises(ValueError, match=message):
        migrations.discover(tmp_path)


# -- verifyctl migrate ----------------------------------------------------------------------------------

def run_cli(monkeypatch, capsys, env: dict[str, str], *argv: str) -> tuple[int, str, str]:
    for name in ("DATABASE_URL", "MIGRATIONS_DIR", "ENVIRONMENT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_verifyctl_migrate_prints_one_line_and_exits_0(monkeypatch, capsys, empty_url):
    code, out, err = run_cli(monkeypatch, capsys, {"DATABASE_URL": empty_url}, "migrate")
    versions = [m.version for m in migrations.discover()]
    assert (code, out, err) == (0, f"applied {len(versions)} migration(s): {', '.join(versions)}\n", "")
    assert run_cli(monkeypatch, capsys, {"DATABASE_URL": empty_url}, "migrate") == (0, "database is up to date\n", "")


@pytest.mark.parametrize("url", [
    "mysql://root@localhost/db",
    "postgresql://nobody@127.0.0.1:1/nothing",
    "postgresql://nobody@localhost:notaport/db",
    "not a url at all",
])
def test_verifyctl_migrate_with_a_bad_database_url_is_a_one_line_error(monkeypatch, capsys, url):
    code, out, err = run_cli(monkeypatch, capsys, {"DATABASE_URL": url}, "migrate")
    assert code == 1 and out == ""
    assert err.startswith("verifyctl: ") and err.count("\n") == 1 and "Traceback" not in err


def test_verifyctl_migrate_on_a_missing_database_is_a_one_line_error(monkeypatch, capsys, pg_server):
    url = pg_server.with_database(f"missing_{uuid.uuid4().hex[:8]}").url()
    code, out, err = run_cli(monkeypatch, capsys, {"DATABASE_URL": url}, "migrate")
    assert code == 1 and err.startswith("verifyctl: cannot connect") and err.count("\n") == 1


def test_verifyctl_migrate_reports_a_failing_migration_in_one_line(monkeypatch, capsys, empty_url, sql_dir):
    write(sql_dir, "1001_bad.sql", "SELECT no_such_column FROM t;")
    code, out, err = run_cli(monkeypatch, capsys, {"DATABASE_URL": empty_url, "MIGRATIONS_DIR": str(sql_dir)},
                             "migrate")
    assert code == 1 and out == "" and err.count("\n") == 1
    assert err.startswith("verifyctl: migration 1001_bad.sql failed")


def test_the_installed_console_script_runs(empty_url):
    """The `verifyctl` entry point from pyproject.toml, as an operator runs it."""
    script = Path(sys.executable).with_name("verifyctl")
    env = {k: v for k, v in os.environ.items() if k not in ("MIGRATIONS_DIR",)}
    done = subprocess.run([str(script), "migrate"], env={**env, "DATABASE_URL": empty_url},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("applied ") and done.stdout.count("\n") == 1
    failed = subprocess.run([str(script), "migrate"], env={**env, "DATABASE_URL": "postgresql://x@127.0.0.1:1/x"},
                            capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1 and failed.stdout == ""
    assert failed.stderr.startswith("verifyctl: ") and failed.stderr.count("\n") == 1
