"""Migration folders and runs for the migration tests (tests/integration/platform/test_migrations.py,
test_migrate_cli.py): a folder of migrations that log their own execution, what they logged, whether
the migration lock is free again, and `verifyctl` run in-process with its output captured.
"""

from __future__ import annotations

from pathlib import Path

from signup_verification import cli
from signup_verification.platform.database import Database
from signup_verification.platform.migrations import MIGRATION_LOCK_KEY


def sample_migrations(tmp_path: Path) -> Path:
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


def run_cli(monkeypatch, capsys, env: dict[str, str], *argv: str) -> tuple[int, str, str]:
    for name in ("DATABASE_URL", "MIGRATIONS_DIR", "ENVIRONMENT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
