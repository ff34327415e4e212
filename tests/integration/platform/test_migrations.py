"""The migration runner and `verifyctl migrate` against fresh, empty databases on the real server."""

from __future__ import annotations

import importlib.resources
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from signup_verification import cli
from signup_verification.platform import migrations
from signup_verification.platform.database import Database
from signup_verification.platform.migration_files import split_statements
from signup_verification.platform.migrations import MIGRATION_LOCK_KEY, MigrationError


def migrations_source():
    return importlib.resources.files("signup_verification.sql")


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
    write(
        folder,
        "001_log.sql",
        "CREATE TABLE log (n serial PRIMARY KEY, version text NOT NULL); INSERT INTO log (version) VALUES ('001');",
    )
    write(folder, "002_table.sql", "CREATE TABLE t (a int); INSERT INTO log (version) VALUES ('002');")
    write(folder, "999_column.sql", "ALTER TABLE t ADD COLUMN b int; INSERT INTO log (version) VALUES ('999');")
    write(folder, "1000_row.sql", "INSERT INTO t (a, b) VALUES (1, 2); INSERT INTO log (version) VALUES ('1000');")
    (folder / "README.md").write_text("not a migration")
    return folder


def write(folder: Path, name: str, sql: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
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
    expected, definitions = migrations.discover(), migrations.discover_definitions()
    run = migrations.migrate(empty_db)
    assert run.migrations == tuple(m.version for m in expected)
    assert run.definitions == tuple(d.name for d in definitions)
    recorded = empty_db.run("SELECT version, name, checksum FROM schema_migrations ORDER BY version")
    assert recorded == [[m.version, m.name, m.checksum] for m in expected]
    assert empty_db.run("SELECT name, checksum FROM schema_definitions ORDER BY name") == sorted(
        [d.name, d.checksum] for d in definitions
    )
    assert empty_db.run("SELECT to_regclass('delivery_intents') IS NOT NULL")[0][0]
    assert migrations.migrate(empty_db) == migrations.MigrationRun()


def test_migrations_apply_in_numeric_order_and_a_second_run_does_nothing(empty_db, sql_dir):
    assert migrations.migrate(empty_db, sql_dir).migrations == ("001", "002", "999", "1000")
    assert log(empty_db) == ["001", "002", "999", "1000"]
    applied_at = empty_db.run("SELECT version, applied_at FROM schema_migrations ORDER BY version")
    assert migrations.migrate(empty_db, sql_dir) == migrations.MigrationRun()
    assert log(empty_db) == ["001", "002", "999", "1000"]  # nothing ran twice
    assert empty_db.run("SELECT version, applied_at FROM schema_migrations ORDER BY version") == applied_at


def test_a_new_file_is_applied_on_the_next_run(empty_db, sql_dir):
    migrations.migrate(empty_db, sql_dir)
    write(sql_dir, "1001_more.sql", "INSERT INTO log (version) VALUES ('1001');")
    assert migrations.migrate(empty_db, sql_dir).migrations == ("1001",)


def test_concurrent_runs_do_not_race(empty_url, sql_dir):
    write(
        sql_dir,
        "002_table.sql",
        "SELECT pg_sleep(0.3); CREATE TABLE t (a int); INSERT INTO log (version) VALUES ('002');",
    )
    barrier, results, errors = threading.Barrier(4), [], []

    def run() -> None:
        db = Database.from_url(empty_url)
        try:
            barrier.wait()
            results.append(list(migrations.migrate(db, sql_dir).migrations))
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
    migrations.migrate(empty_db, sql_dir)
    write(
        sql_dir,
        "1001_bad.sql",
        "CREATE TABLE half (x int); INSERT INTO log (version) VALUES ('1001'); SELECT no_such_column FROM t;",
    )
    with pytest.raises(MigrationError, match=r"1001_bad.sql failed: .*no_such_column"):
        migrations.migrate(empty_db, sql_dir)
    assert log(empty_db) == ["001", "002", "999", "1000"]  # the earlier runs stay applied
    assert empty_db.run("SELECT to_regclass('half')")[0][0] is None
    assert lock_is_free(empty_url)
    write(sql_dir, "1001_bad.sql", "CREATE TABLE half (x int); INSERT INTO log (version) VALUES ('1001');")
    assert migrations.migrate(empty_db, sql_dir).migrations == ("1001",)


def test_the_pending_migrations_of_one_run_apply_all_or_nothing(empty_db, sql_dir, empty_url):
    """One transaction: a deploy whose third migration fails leaves the database as it found it."""
    write(sql_dir, "1001_bad.sql", "SELECT no_such_column FROM t;")
    with pytest.raises(MigrationError, match=r"1001_bad.sql failed"):
        migrations.migrate(empty_db, sql_dir)
    assert empty_db.run("SELECT to_regclass('log'), to_regclass('t')") == [[None, None]]
    assert empty_db.run("SELECT count(*)::int FROM schema_migrations") == [[0]]
    assert lock_is_free(empty_url)


@pytest.mark.parametrize(
    "names, message",
    [
        (["001_ok.sql", "2_short.sql"], "001_name.sql"),
        (["001_ok.sql", "002-dash.sql"], "001_name.sql"),
        (["001_ok.sql", "002_Upper.sql"], "001_name.sql"),
        (["001_a.sql", "001_b.sql"], "share a version"),
        (["001_a.sql", "0001_b.sql"], "share a version"),
    ],
)
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
    names = [d.name for d in migrations.discover_definitions()]
    assert (code, out, err) == (
        0,
        f"applied {len(versions)} migration(s): {', '.join(versions)}; "
        f"{len(names)} definition(s): {', '.join(names)}\n",
        "",
    )
    assert run_cli(monkeypatch, capsys, {"DATABASE_URL": empty_url}, "migrate") == (0, "database is up to date\n", "")


@pytest.mark.parametrize(
    "url",
    [
        "mysql://root@localhost/db",
        "postgresql://nobody@127.0.0.1:1/nothing",
        "postgresql://nobody@localhost:notaport/db",
        "not a url at all",
    ],
)
def test_verifyctl_migrate_with_a_bad_database_url_is_a_one_line_error(monkeypatch, capsys, url):
    code, out, err = run_cli(monkeypatch, capsys, {"DATABASE_URL": url}, "migrate")
    assert code == 1 and out == ""
    assert err.startswith("verifyctl: ") and err.count("\n") == 1 and "Traceback" not in err


def test_verifyctl_migrate_on_a_missing_database_is_a_one_line_error(monkeypatch, capsys, pg_server):
    url = pg_server.with_database(f"missing_{uuid.uuid4().hex[:8]}").url()
    code, out, err = run_cli(monkeypatch, capsys, {"DATABASE_URL": url}, "migrate")
    assert code == 1 and err.startswith('verifyctl: database "missing_') and '" does not exist' in err
    assert err.count("\n") == 1


def test_verifyctl_migrate_reports_a_failing_migration_in_one_line(monkeypatch, capsys, empty_url, sql_dir):
    write(sql_dir, "1001_bad.sql", "SELECT no_such_column FROM t;")
    code, out, err = run_cli(
        monkeypatch, capsys, {"DATABASE_URL": empty_url, "MIGRATIONS_DIR": str(sql_dir)}, "migrate"
    )
    assert code == 1 and out == "" and err.count("\n") == 1
    assert err.startswith("verifyctl: migration 1001_bad.sql failed")


def test_the_installed_console_script_runs(empty_url):
    """The `verifyctl` entry point from pyproject.toml, as an operator runs it."""
    script = Path(sys.executable).with_name("verifyctl")
    env = {k: v for k, v in os.environ.items() if k not in ("MIGRATIONS_DIR",)}
    done = subprocess.run(
        [str(script), "migrate"], env={**env, "DATABASE_URL": empty_url}, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout.startswith("applied ") and done.stdout.count("\n") == 1
    failed = subprocess.run(
        [str(script), "migrate"],
        env={**env, "DATABASE_URL": "postgresql://x@127.0.0.1:1/x"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert failed.returncode == 1 and failed.stdout == ""
    assert failed.stderr.startswith("verifyctl: ") and failed.stderr.count("\n") == 1


# -- missing files, timeouts, no-transaction files, --list ---------------------------------------------


def test_a_folder_without_migrations_is_an_error_not_an_up_to_date_database(empty_db, tmp_path, empty_url):
    with pytest.raises(MigrationError, match="no migration files"):
        migrations.migrate(empty_db, tmp_path)
    assert empty_db.run("SELECT to_regclass('schema_migrations')") == [[None]]


def test_verifyctl_migrate_with_an_empty_migrations_dir_exits_1_in_one_line(monkeypatch, capsys, empty_url, tmp_path):
    code, out, err = run_cli(
        monkeypatch, capsys, {"DATABASE_URL": empty_url, "MIGRATIONS_DIR": str(tmp_path)}, "migrate"
    )
    assert (code, out) == (1, "") and err == f"verifyctl: no migration files (NNN_name.sql) found in {tmp_path}\n"


def test_a_recorded_migration_missing_from_the_files_is_refused(monkeypatch, capsys, empty_db, empty_url, sql_dir):
    migrations.migrate(empty_db, sql_dir)
    (sql_dir / "999_column.sql").unlink()
    with pytest.raises(MigrationError, match="999_column.sql is applied in the database but missing"):
        migrations.migrate(empty_db, sql_dir)
    code, out, err = run_cli(
        monkeypatch, capsys, {"DATABASE_URL": empty_url, "MIGRATIONS_DIR": str(sql_dir)}, "migrate"
    )
    assert code == 1 and out == "" and err.count("\n") == 1 and "999_column.sql" in err
    assert lock_is_free(empty_url)


def test_a_lock_wait_fails_fast_with_a_clear_line_instead_of_queueing(empty_db, sql_dir, empty_url):
    """ALTER TABLE behind a long transaction would queue every later query on the table behind it."""
    migrations.migrate(empty_db, sql_dir)
    write(sql_dir, "1001_alter.sql", "ALTER TABLE t ADD COLUMN c int;")
    reader = Database.from_url(empty_url)
    try:
        with reader.transaction():
            reader.run("SELECT count(*) FROM t")  # holds ACCESS SHARE on t until the transaction ends
            started = time.monotonic()
            with pytest.raises(
                MigrationError,
                match=r"1001_alter.sql waited more than MIGRATION_LOCK_TIMEOUT_MS "
                r"\(300 ms\) for a lock",
            ):
                migrations.migrate(empty_db, sql_dir, config=migrations.MigrationConfig(lock_timeout_ms=300))
            assert time.monotonic() - started < 5
    finally:
        reader.close()
    assert lock_is_free(empty_url)
    assert migrations.migrate(empty_db, sql_dir).migrations == ("1001",)  # the long transaction ended


def test_a_statement_over_the_migration_timeout_is_cancelled(empty_db, sql_dir):
    write(sql_dir, "1001_slow.sql", "SELECT pg_sleep(5);")
    with pytest.raises(
        MigrationError, match=r"1001_slow.sql ran longer than MIGRATION_STATEMENT_TIMEOUT_MS \(300 ms\)"
    ):
        migrations.migrate(empty_db, sql_dir, config=migrations.MigrationConfig(statement_timeout_ms=300))


def test_the_migration_session_limits_do_not_outlive_the_run(empty_db, sql_dir):
    before = empty_db.run("SELECT current_setting('statement_timeout'), current_setting('lock_timeout')")
    migrations.migrate(
        empty_db, sql_dir, config=migrations.MigrationConfig(statement_timeout_ms=1234, lock_timeout_ms=567)
    )
    assert empty_db.run("SELECT current_setting('statement_timeout'), current_setting('lock_timeout')") == before


@pytest.mark.parametrize(
    "name, value", [("MIGRATION_LOCK_TIMEOUT_MS", "soon"), ("MIGRATION_STATEMENT_TIMEOUT_MS", "0")]
)
def test_a_bad_timeout_setting_is_a_one_line_error(monkeypatch, capsys, empty_url, name, value):
    code, out, err = run_cli(monkeypatch, capsys, {"DATABASE_URL": empty_url, name: value}, "migrate")
    assert code == 1 and out == "" and err.startswith(f"verifyctl: {name} must be") and err.count("\n") == 1


CONCURRENT_INDEX = (
    "-- migrate: no-transaction\n"
    "-- A failed CREATE INDEX CONCURRENTLY leaves an invalid index: drop it so a re-run starts clean.\n"
    "DROP INDEX CONCURRENTLY IF EXISTS t_a;\n"
    "CREATE INDEX CONCURRENTLY t_a ON t (a);  -- 'a ; quoted' semicolon in a comment\n"
    "INSERT INTO log (version) VALUES ('1001;');\n"
)


def test_a_no_transaction_migration_builds_an_index_concurrently(empty_db, sql_dir):
    write(sql_dir, "1001_index.sql", CONCURRENT_INDEX)
    write(sql_dir, "1002_after.sql", "INSERT INTO log (version) VALUES ('1002');")
    assert migrations.migrate(empty_db, sql_dir).migrations == ("001", "002", "999", "1000", "1001", "1002")
    assert empty_db.run("SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass('t_a')") == [[True]]
    assert log(empty_db) == ["001", "002", "999", "1000", "1001;", "1002"]
    assert migrations.migrate(empty_db, sql_dir) == migrations.MigrationRun()


def test_without_the_marker_the_same_file_fails_inside_the_transaction(empty_db, sql_dir):
    write(sql_dir, "1001_index.sql", CONCURRENT_INDEX.replace("-- migrate: no-transaction\n", ""))
    with pytest.raises(MigrationError, match="1001_index.sql failed: .*cannot run inside a transaction block"):
        migrations.migrate(empty_db, sql_dir)


def test_split_statements_knows_quotes_dollar_quotes_and_comments():
    sql = (
        "-- head; comment\nCREATE FUNCTION f() RETURNS text LANGUAGE sql AS $body$ SELECT 'a;b' $body$;\n"
        "/* block; */ SELECT 'it''s; fine', \"odd;name\" FROM x;  \n-- trailing; comment only\n"
    )
    assert split_statements(sql) == [
        "-- head; comment\nCREATE FUNCTION f() RETURNS text LANGUAGE sql AS $body$ SELECT 'a;b' $body$",
        "/* block; */ SELECT 'it''s; fine', \"odd;name\" FROM x",
    ]


def test_verifyctl_migrate_list_shows_applied_and_pending_without_writing(monkeypatch, capsys, empty_url, empty_db):
    code, out, err = run_cli(monkeypatch, capsys, {"DATABASE_URL": empty_url}, "migrate", "--list")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == "migrations from the installed package (signup_verification.sql):"
    assert lines[1 : 1 + len(migrations.discover())] == [f"  pending  {m.filename}" for m in migrations.discover()]
    assert "definitions (all re-applied with the pending migrations):" in lines
    assert f"  new      {migrations.discover_definitions()[0].filename}" in lines
    assert empty_db.run("SELECT to_regclass('schema_migrations')") == [[None]]  # --list wrote nothing

    migrations.migrate(empty_db)
    code, out, err = run_cli(monkeypatch, capsys, {"DATABASE_URL": empty_url}, "migrate", "--list")
    states = [line.split()[0] for line in out.splitlines() if line.startswith("  ")]
    assert code == 0 and set(states) == {"applied", "current"} and "definitions:" in out.splitlines()


def test_migrate_list_names_changed_new_and_missing_files(empty_db, sql_dir):
    write(sql_dir, "003_definitions.sql", (migrations_source() / "004_schema_definitions.sql").read_text())
    f1, g, f2, h = (
        f"-- name: {name}\nCREATE OR REPLACE FUNCTION {name}() RETURNS int LANGUAGE sql AS 'SELECT {n}';\n"
        for name, n in (("f", 1), ("g", 1), ("f", 2), ("h", 3))
    )
    write(sql_dir, "functions/defs.sql", f1 + g)
    migrations.migrate(empty_db, sql_dir)
    write(sql_dir, "functions/defs.sql", f2 + h)
    (sql_dir / "999_column.sql").unlink()
    write(sql_dir, "1001_more.sql", "SELECT 1;")
    found = migrations.status(empty_db, sql_dir)
    assert [(e.state, e.name) for e in found.migrations] == [
        ("applied", "001_log.sql"),
        ("applied", "002_table.sql"),
        ("applied", "003_definitions.sql"),
        ("missing", "999_column.sql"),
        ("applied", "1000_row.sql"),
        ("pending", "1001_more.sql"),
    ]
    assert [(e.state, e.name) for e in found.definitions] == [
        ("changed", "functions/defs.sql:f"),
        ("new", "functions/defs.sql:h"),
        ("retired", "g"),
    ]
