"""Migration runner: numbered migrations once each, then the always-current definitions.

Files and their rules: migration_files.py and sql/README.md. One run, under an advisory lock (two
deploys, two test workers), with the session's own statement and lock timeouts:
1. refuses a recorded migration that is missing from the files or whose file changed;
2. applies the pending migrations and then the definitions that changed (all of them when a
   migration ran) in ONE transaction: a failure anywhere leaves the database as it was. A
   `-- migrate: no-transaction` migration commits what came before it and runs on its own;
3. in that transaction, drops the functions and views of every recorded definition no section
   names any more (a renamed version, a retired one) and forgets it, and refuses a definition that
   does not leave exactly one object of its name (a changed signature needs a new name).
Every statement the runner itself sends is a section of platform/queries/migrations.sql.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from .catalogue import catalogue
from .config import MigrationConfig
from .database import Database, DatabaseError, UnavailableError
from .migration_files import Definition, Migration, Source, discover, discover_definitions, split_statements
from .timestamps import rfc3339

__all__ = [
    "MIGRATION_LOCK_KEY",
    "MigrationError",
    "MigrationRun",
    "Status",
    "discover",
    "discover_definitions",
    "migrate",
    "status",
]

# Arbitrary but fixed: the advisory lock key every migration run takes.
MIGRATION_LOCK_KEY = 7_321_004_211

_SQL = catalogue("platform")
_TABLE = _SQL["migrations_table"]
_TABLES = _SQL["migrations_tables"]
_APPLIED = _SQL["migrations_applied"]
_RESTAMP = _SQL["migrations_restamp"]
_RECORD = _SQL["migrations_record"]
_DEFINITIONS = _SQL["migrations_definitions"]
_RECORD_DEFINITION = _SQL["migrations_record_definition"]
_FORGET_DEFINITION = _SQL["migrations_forget_definition"]
_OBJECTS = _SQL["migrations_objects"]
_OBJECT_COUNTS = _SQL["migrations_object_counts"]
_SESSION = _SQL["migrations_session"]
_LOCK = _SQL["migrations_lock"]
_UNLOCK = _SQL["migrations_unlock"]


class MigrationError(RuntimeError):
    """A migration failed, is missing or changed; the message names the file (one CLI line)."""


@dataclass(frozen=True)
class MigrationRun:
    migrations: tuple[str, ...] = ()  # versions applied by this run
    definitions: tuple[str, ...] = ()  # definition names (re)applied by this run
    retired: tuple[str, ...] = ()  # recorded definitions no section names any more: dropped by this run

    def summary(self) -> str:
        if not self.migrations and not self.definitions and not self.retired:
            return "database is up to date"
        parts = [
            f"applied {len(self.migrations)} migration(s)"
            + (f": {', '.join(self.migrations)}" if self.migrations else "")
        ]
        if self.definitions:
            parts.append(f"{len(self.definitions)} definition(s): {', '.join(self.definitions)}")
        if self.retired:
            parts.append(f"dropped {len(self.retired)} retired definition(s): {', '.join(self.retired)}")
        return "; ".join(parts)


def migrate(
    db: Database, directory: Path | str | None = None, *, config: MigrationConfig = MigrationConfig()
) -> MigrationRun:
    """Apply pending migrations and changed definitions; returns what this call applied."""
    source = Source.of(directory if directory is not None else config.directory)
    found, definitions = discover(source), discover_definitions(source)
    if not found:
        raise MigrationError(f"no migration files (NNN_name.sql) found in {source.label}")
    with _migration_session(db, config):
        db.execute_script(_TABLE)
        pending = _pending(db, found, db.rows(_APPLIED), source)
        return _apply_all(db, pending, definitions, source, config)


def _pending(db: Database, found: list[Migration], recorded: list[dict], source: Source) -> list[Migration]:
    by_version = {m.version: m for m in found}
    for row in sorted(recorded, key=lambda r: int(r["version"])):
        migration = by_version.get(row["version"])
        if migration is None:
            raise MigrationError(
                f"migration {row['version']}_{row['name']}.sql is applied in the database but missing "
                f"from {source.label}: this release is older than the database"
            )
        if row["checksum"] in migration.earlier_checksums:  # the same statements, comments rewritten since
            db.run(_RESTAMP, version=migration.version, checksum=migration.checksum)
        elif migration.checksum != row["checksum"]:
            raise MigrationError(f"migration {migration.filename} changed after it was applied")
    done = {row["version"] for row in recorded}
    return [m for m in found if m.version not in done]


def _groups(pending: list[Migration]) -> list[tuple[bool, list[Migration]]]:
    """Consecutive transactional migrations share a transaction; a no-transaction one stands alone."""
    groups: list[tuple[bool, list[Migration]]] = []
    for migration in pending:
        if migration.transactional and groups and groups[-1][0]:
            groups[-1][1].append(migration)
        else:
            groups.append((migration.transactional, [migration]))
    return groups


def _apply_all(
    db: Database, pending: list[Migration], definitions: list[Definition], source: Source, config: MigrationConfig
) -> MigrationRun:
    applied: list[str] = []
    refreshed: tuple[list[str], list[str]] = ([], [])
    groups = _groups(pending)
    if not groups or not groups[-1][0]:
        groups.append((True, []))  # the definitions still get their transaction
    for index, (transactional, group) in enumerate(groups):
        if not transactional:
            for migration in group:
                _apply_outside_transaction(db, migration, config)
        else:
            with db.transaction():
                for migration in group:
                    _apply(db, migration, config)
                if index == len(groups) - 1:
                    refreshed = _apply_definitions(db, definitions, bool(pending), source, config)
        applied.extend(m.version for m in group)
    return MigrationRun(tuple(applied), tuple(refreshed[0]), tuple(refreshed[1]))


def _apply(db: Database, migration: Migration, config: MigrationConfig) -> None:
    with _named(f"migration {migration.filename}", config):
        db.execute_script(migration.text)
        _record(db, migration)


def _apply_outside_transaction(db: Database, migration: Migration, config: MigrationConfig) -> None:
    """Statement by statement, autocommit; recorded only when every statement succeeded. A file
    that fails half way keeps what it did: write it to run again (DROP INDEX CONCURRENTLY IF EXISTS
    first, since a failed CREATE INDEX CONCURRENTLY leaves an invalid index behind)."""
    with _named(f"migration {migration.filename}", config):
        for statement in split_statements(migration.text):
            db.execute_script(statement)
        _record(db, migration)


def _record(db: Database, migration: Migration) -> None:
    db.run(
        _RECORD,
        version=migration.version,
        name=migration.name,
        checksum=migration.checksum,
    )


def _apply_definitions(
    db: Database, definitions: list[Definition], migrated: bool, source: Source, config: MigrationConfig
) -> tuple[list[str], list[str]]:
    """Inside the run's last transaction, after its migrations (which may have changed what they read).
    Returns the definitions applied and the retired ones dropped."""
    has_table = db.single(_TABLES)["definitions"]
    if not definitions and not has_table:
        return [], []
    if not has_table:
        raise MigrationError(
            f"{source.label} has definitions but no migration creates schema_definitions "
            "(the bookkeeping table of the definitions)"
        )
    recorded = {row["name"]: row["checksum"] for row in db.rows(_DEFINITIONS)}
    applied = []
    for definition in definitions:
        if migrated or recorded.get(definition.name) != definition.checksum:
            with _named(f"definition {definition.filename}", config):
                db.execute_script(definition.text)
                db.run(_RECORD_DEFINITION, name=definition.name, checksum=definition.checksum)
            applied.append(definition.name)
    # Read again: a migration of this run may have deleted a row.
    names = {d.name for d in definitions}
    retired = sorted(r["name"] for r in db.rows(_DEFINITIONS) if r["name"] not in names)
    for name in retired:
        with _named(f"dropping the retired definition {name}", config):
            for row in db.rows(_OBJECTS, name=name):
                db.execute_script(f"DROP {row['object']}")  # nosec B608: a regprocedure/regclass the catalog quoted
            db.run(_FORGET_DEFINITION, name=name)
    if applied:
        wrong = {r["name"]: r["objects"] for r in db.rows(_OBJECT_COUNTS, names=applied) if r["objects"] != 1}
        for name, count in wrong.items():
            where = next(d.filename for d in definitions if d.name == name)
            if count == 0:
                raise MigrationError(f"definition {where} creates no function or view named {name}")
            raise MigrationError(
                f"definition {where} leaves {count} functions named {name}: a definition that changes its "
                f"arguments or result takes a new name ({name}_v2, ...) and the old one is dropped by the runner"
            )
    return applied, retired


@contextmanager
def _migration_session(db: Database, config: MigrationConfig) -> Iterator[None]:
    """The session's own timeouts (restored after) and the advisory lock (released after)."""
    session = _SESSION
    previous = db.single(session, statement_timeout=str(config.statement_timeout_ms), lock_timeout="0")
    try:
        try:
            db.run(_LOCK, key=MIGRATION_LOCK_KEY)
        except UnavailableError as exc:
            raise MigrationError(
                f"another migration run held the migration lock for more than "
                f"MIGRATION_STATEMENT_TIMEOUT_MS ({config.statement_timeout_ms} ms)"
            ) from exc
        try:
            db.one(
                session, statement_timeout=str(config.statement_timeout_ms), lock_timeout=str(config.lock_timeout_ms)
            )
            yield
        finally:
            db.run(_UNLOCK, key=MIGRATION_LOCK_KEY)
    finally:
        db.one(session, statement_timeout=previous["statement_timeout"], lock_timeout=previous["lock_timeout"])


@contextmanager
def _named(what: str, config: MigrationConfig) -> Iterator[None]:
    """Database errors become one line naming the file; the transaction around it rolls back."""
    try:
        yield
    except (DatabaseError, UnavailableError) as exc:
        cause = exc.__cause__ if isinstance(exc, UnavailableError) else exc
        if not isinstance(cause, DatabaseError):
            raise  # the connection itself failed: its own one-line message says so
        fields = cause.args[0] if cause.args and isinstance(cause.args[0], dict) else {}
        code, reason = fields.get("C"), fields.get("M", type(cause).__name__)
        if code == "55P03":
            raise MigrationError(
                f"{what} waited more than MIGRATION_LOCK_TIMEOUT_MS ({config.lock_timeout_ms} ms) "
                "for a lock another session holds (a long transaction?); its transaction was rolled "
                "back: retry when that session ends"
            ) from exc
        if code == "57014":
            raise MigrationError(
                f"{what} ran longer than MIGRATION_STATEMENT_TIMEOUT_MS "
                f"({config.statement_timeout_ms} ms); its transaction was rolled back"
            ) from exc
        raise MigrationError(f"{what} failed: {reason}") from exc


# -- verifyctl migrate --list ---------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    name: str  # file name (migrations) or <owner>/functions/<file>:<name>
    state: str  # migrations: applied | pending | missing; definitions: current | changed | new | retired
    applied_at: datetime | None = None


@dataclass(frozen=True)
class Status:
    source: str
    migrations: tuple[Entry, ...]
    definitions: tuple[Entry, ...]

    def render(self) -> str:
        pending = sum(e.state == "pending" for e in self.migrations)
        lines = [f"migrations from {self.source}:"]
        lines += [_line(e) for e in self.migrations] or ["  (none)"]
        lines.append("definitions" + (" (all re-applied with the pending migrations):" if pending else ":"))
        lines += [_line(e) for e in self.definitions] or ["  (none)"]
        return "\n".join(lines)


def _line(entry: Entry) -> str:
    when = f"  {rfc3339(entry.applied_at)}" if entry.applied_at else ""
    return f"  {entry.state:<8} {entry.name}{when}"


def status(db: Database, directory: Path | str | None = None, *, config: MigrationConfig = MigrationConfig()) -> Status:
    """What is applied and what is pending, read without writing anything (no table is created)."""
    source = Source.of(directory if directory is not None else config.directory)
    found, definitions = discover(source), discover_definitions(source)
    tables = db.single(_TABLES)
    recorded = {r["version"]: r for r in db.rows(_APPLIED)} if tables["migrations"] else {}
    entries = [
        Entry(
            m.filename,
            "applied" if m.version in recorded else "pending",
            recorded[m.version]["applied_at"] if m.version in recorded else None,
        )
        for m in found
    ]
    versions = {m.version for m in found}
    entries += [
        Entry(f"{v}_{r['name']}.sql", "missing", r["applied_at"]) for v, r in recorded.items() if v not in versions
    ]
    entries.sort(key=lambda e: int(e.name.split("_", 1)[0]))
    defined = {r["name"]: r for r in db.rows(_DEFINITIONS)} if tables["definitions"] else {}
    states = []
    for d in definitions:
        row = defined.get(d.name)
        state = "new" if row is None else "current" if row["checksum"] == d.checksum else "changed"
        states.append(Entry(d.filename, state, row["applied_at"] if row else None))
    names = {d.name for d in definitions}
    states += [Entry(name, "retired", row["applied_at"]) for name, row in defined.items() if name not in names]
    return Status(source.label, tuple(entries), tuple(states))
