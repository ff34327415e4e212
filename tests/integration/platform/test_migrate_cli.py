"""`verifyctl migrate` as an operator runs it, against fresh, empty databases on the real server: one
line on success, one line and exit 1 on any error (a bad or missing database, a failing migration,
an empty folder, a bad timeout setting), the installed console script, and `--list` (applied,
pending, changed, new and missing files) without writing.
"""

from __future__ import annotations

import importlib.resources
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from signup_verification.platform import migrations
from signup_verification.platform.database import Database
from support.migration_runs import run_cli, sample_migrations, write


def migrations_source():
    return importlib.resources.files("signup_verification.sql")


@pytest.fixture
def empty_db(empty_url: str) -> Database:
    db = Database.from_url(empty_url)
    yield db
    db.close()


@pytest.fixture
def sql_dir(tmp_path: Path) -> Path:
    return sample_migrations(tmp_path)


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


def test_verifyctl_migrate_with_an_empty_migrations_dir_exits_1_in_one_line(monkeypatch, capsys, empty_url, tmp_path):
    code, out, err = run_cli(
        monkeypatch, capsys, {"DATABASE_URL": empty_url, "MIGRATIONS_DIR": str(tmp_path)}, "migrate"
    )
    assert (code, out) == (1, "") and err == f"verifyctl: no migration files (NNN_name.sql) found in {tmp_path}\n"


@pytest.mark.parametrize(
    "name, value", [("MIGRATION_LOCK_TIMEOUT_MS", "soon"), ("MIGRATION_STATEMENT_TIMEOUT_MS", "0")]
)
def test_a_bad_timeout_setting_is_a_one_line_error(monkeypatch, capsys, empty_url, name, value):
    code, out, err = run_cli(monkeypatch, capsys, {"DATABASE_URL": empty_url, name: value}, "migrate")
    assert code == 1 and out == "" and err.startswith(f"verifyctl: {name} must be") and err.count("\n") == 1


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
