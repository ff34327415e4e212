"""Migration runner: plain numbered `.sql` files from sql/, applied in order, each in its own transaction.

An advisory lock serialises concurrent runs (two deploys, or two test workers); versions already
recorded in `schema_migrations` are skipped, so an up-to-date database is left untouched.
"""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .database import Database, DatabaseError
from .settings import REPO_ROOT

# Arbitrary but fixed: the advisory lock key every migration run takes.
MIGRATION_LOCK_KEY = 7_321_004_211
_FILE = re.compile(r"^(\d{3,})_([a-z0-9_]+)\.sql$")


class MigrationError(RuntimeError):
    """A migration failed or an applied one changed; the message names the file (one CLI line)."""


@dataclass(frozen=True)
class Migration:
    version: str
    name: str
    path: Path

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


def migrations_dir() -> Path:
    return Path(os.environ.get("MIGRATIONS_DIR") or REPO_ROOT / "sql")


def discover(directory: Path | None = None) -> list[Migration]:
    directory = directory or migrations_dir()
    found = []
    for path in directory.glob("*.sql"):
        match = _FILE.match(path.name)
        if not match:
            raise ValueError(f"migration file name must look like 001_name.sql: {path.name}")
        found.append(Migration(match.group(1), match.group(2), path))
    # Numeric order: '1000_x' comes after '999_y' (a name sort would put it first).
    found.sort(key=lambda m: int(m.version))
    numbers = [int(m.version) for m in found]
    if len(set(numbers)) != len(numbers):
        raise ValueError("two migration files share a version number")
    return found


def migrate(db: Database, directory: Path | None = None) -> list[str]:
    """Apply pending migrations; returns the versions applied by this call."""
    pending = discover(directory)
    applied: list[str] = []
    db.run("SELECT pg_advisory_lock(:k)", k=MIGRATION_LOCK_KEY)
    try:
        db.execute_script(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version text PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {row[0]: row[1] for row in db.run("SELECT version, checksum FROM schema_migrations")}
        for migration in pending:
            if migration.version in done:
                if done[migration.version] != migration.checksum:
                    raise MigrationError(f"migration {migration.path.name} changed after it was applied")
                continue
            _apply(db, migration)
            applied.append(migration.version)
    finally:
        db.run("SELECT pg_advisory_unlock(:k)", k=MIGRATION_LOCK_KEY)
    return applied


def _apply(db: Database, migration: Migration) -> None:
    """One migration and its record in one transaction: a failure leaves neither behind."""
    try:
        with db.transaction():
            db.execute_script(migration.path.read_text())
            db.run("INSERT INTO schema_migrations (version, name, checksum) VALUES (:v, :n, :c)",
                   v=migration.version, n=migration.name, c=migration.checksum)
    except DatabaseError as exc:
        fields = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
        reason = fields.get("M", type(exc).__name__)
        raise MigrationError(f"migration {migration.path.name} failed: {reason}") from exc
