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

from .database import Database
from .settings import REPO_ROOT

# Arbitrary but fixed: the advisory lock key every migration run takes.
MIGRATION_LOCK_KEY = 7_321_004_211
_FILE = re.compile(r"^(\d{3,})_([a-z0-9_]+)\.sql$")


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
    for path in sorted(directory.glob("*.sql")):
        match = _FILE.match(path.name)
        if not match:
            raise ValueError(f"migration file name must look like 001_name.sql: {path.name}")
        found.append(Migration(match.group(1), match.group(2), path))
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
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
                    raise RuntimeError(f"migration {migration.path.name} changed after it was applied")
                continue
            with db.transaction():
                db.execute_script(migration.path.read_text())
                db.run("INSERT INTO schema_migrations (version, name, checksum) VALUES (:v, :n, :c)",
                       v=migration.version, n=migration.name, c=migration.checksum)
            applied.append(migration.version)
    finally:
        db.run("SELECT pg_advisory_unlock(:k)", k=MIGRATION_LOCK_KEY)
    return applied
