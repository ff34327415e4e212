"""sql/schema.sql is the present tense of the migrations: a database built from it and the owners'
functions/ is the database the migrations build, object for object (pg_dump --schema-only of both,
which prints every table, column, default, constraint, index, trigger, function and view)."""

from __future__ import annotations

import importlib.resources
import shutil
import subprocess
from pathlib import Path

import pytest

from signup_verification.platform import migrations
from signup_verification.platform.catalogue import parse_sections
from signup_verification.platform.database import Database

SCHEMA = importlib.resources.files("signup_verification.sql") / "schema.sql"


def _pg_dump() -> str:
    try:
        import pgserver
    except ImportError:
        found = shutil.which("pg_dump")
    else:
        found = str(Path(pgserver.__file__).parent / "pginstall" / "bin" / "pg_dump")
    if not found or not Path(found).exists():
        pytest.skip("needs pg_dump (the pgserver wheel has one)")
    return found


def dump(db: Database) -> list[str]:
    """The schema as pg_dump prints it, without its comment lines (they name nothing but the objects)."""
    done = subprocess.run(
        [_pg_dump(), "--schema-only", "--no-owner", "--no-privileges", "--dbname", db.params.url()],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [line for line in done.stdout.splitlines() if line and not line.startswith("--")]


def build_from_schema_file(db: Database) -> None:
    sections = {s.name: s.text for s in parse_sections(SCHEMA.read_text(encoding="utf-8"), "sql/schema.sql")}
    assert list(sections) == ["tables", "triggers"]
    db.execute_script(sections["tables"])
    for definition in migrations.discover_definitions():
        db.execute_script(definition.text)
    db.execute_script(sections["triggers"])


def test_the_schema_file_is_the_migrated_schema(db, new_database):
    built = new_database()
    build_from_schema_file(built)
    migrated, from_file = dump(db), dump(built)
    assert from_file == migrated, "\n".join(
        f"{'-' if line in migrated else '+'} {line}" for line in sorted(set(migrated) ^ set(from_file))
    )


def test_a_difference_is_seen(new_database):
    """The comparison cannot pass vacuously: one index less is a difference."""
    built, other = new_database(), new_database()
    build_from_schema_file(built)
    build_from_schema_file(other)
    other.execute_script("DROP INDEX verifications_wrong_codes")
    assert dump(built) != dump(other)
