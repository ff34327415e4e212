"""Repeatable definitions (each owner's functions/ folder): functions and views re-applied when they change.

The frozen migrations 001/002 still create the original objects; the definitions then replace them,
so a database migrated from nothing and one migrated by an earlier release end identical. A
definition's name is its object's: one that changes its arguments takes a new name, and the runner
drops what no definition names any more (no hand-kept DROP lists).
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

import pytest

from signup_verification.platform import migrations
from signup_verification.platform.database import Database
from signup_verification.platform.migrations import MigrationError

PACKAGED = importlib.resources.files("signup_verification.sql")
# What the release before the definitions shipped: its migrations, byte for byte.
BEFORE_DEFINITIONS = ["001_schema.sql", "002_create_verification.sql", "003_retention_indexes.sql"]

# The whole schema as the catalog describes it: equal snapshots, equal databases.
SNAPSHOT = {
    "functions": "SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p"
    " WHERE p.pronamespace = 'public'::regnamespace ORDER BY 1, 2",
    "views": "SELECT viewname, pg_get_viewdef(viewname::regclass) FROM pg_views WHERE schemaname = 'public' ORDER BY 1",
    "columns": "SELECT table_name, column_name, data_type, is_nullable, column_default FROM information_schema.columns"
    " WHERE table_schema = 'public' ORDER BY table_name, ordinal_position",
    "indexes": "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1",
    "constraints": "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint"
    " WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2",
    "triggers": "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1",
}


def snapshot(db: Database) -> dict[str, list]:
    return {part: db.run(sql) for part, sql in SNAPSHOT.items()}


def write(folder: Path, name: str, sql: str) -> None:
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(sql)


DEFS = "functions/defs.sql"  # a folder's definitions: its functions/ folder, one file here


def test_an_upgraded_database_ends_identical_to_a_fresh_one(new_database, tmp_path):
    old_release = tmp_path / "old"
    old_release.mkdir()
    for name in BEFORE_DEFINITIONS:
        (old_release / name).write_bytes((PACKAGED / name).read_bytes())
    upgraded, fresh = new_database(), new_database()
    assert migrations.migrate(upgraded, old_release).migrations == ("001", "002", "003")
    before = snapshot(upgraded)

    run = migrations.migrate(upgraded)  # the current package on the older database
    # every migration after the old release's, in order (004 onwards; later issues append theirs)
    assert run.migrations == tuple(m.version for m in migrations.discover() if m.version > "003")
    assert run.definitions == tuple(d.name for d in migrations.discover_definitions())
    migrations.migrate(fresh)
    assert snapshot(upgraded) == snapshot(fresh)
    # Moving the objects into definitions changed none of them: same bodies, same view text (except
    # what later migrations changed on purpose: 005 create returns outcomes, not HTTP statuses;
    # abuse limits at create and the SMS budget; 008's new delivery_intents columns in the SELECT *
    # view; the suppression that skips events).
    changed_since = {
        "create_verification",
        "create_limit_wait",
        "limit_wait",
        "sms_budget_left",
        "eligible_delivery_intents",
        "delivery_attempts_append_only",  # names its table (delivery_observations shares it)
        "suppress_undelivered_intents",  # leaves webhook events alone (plpgsql: applies before 008)
    }
    after = snapshot(upgraded)
    for kind in ("functions", "views"):
        existed = {row[0] for row in before[kind]}  # objects added later (delivery_failed...) are new, not moved
        kept = [
            [r for r in part if r[0] in existed and r[0] not in changed_since] for part in (after[kind], before[kind])
        ]
        assert kept[0] == kept[1], kind
    assert upgraded.run("SELECT name, checksum FROM schema_definitions ORDER BY name") == sorted(
        [d.name, d.checksum] for d in migrations.discover_definitions()
    )
    assert {name for name, _ in snapshot(fresh)["functions"]} >= {
        "create_verification",
        "suppress_undelivered_intents",
        "delivery_attempts_append_only",
    }


def test_a_database_holding_superseded_signatures_upgrades_to_the_current_ones(new_database):
    """A database last migrated while a function had other arguments or another result type still
    holds that version: 052 drops it before the definitions apply, so the upgrade ends with one
    function per name, as a fresh database has."""
    upgraded, fresh = new_database(), new_database()
    migrations.migrate(upgraded)
    migrations.migrate(fresh)
    upgraded.execute_script(
        "DROP FUNCTION report_verdicts(jsonb);"
        " CREATE FUNCTION report_verdicts(p_events jsonb) RETURNS TABLE (dedup_key text, code text)"
        " LANGUAGE sql AS 'SELECT NULL::text, NULL::text';"
        " CREATE FUNCTION destination_suppression(p_channel text, p_keys bytea[]) RETURNS boolean"
        " LANGUAGE sql AS 'SELECT false';"
        " CREATE FUNCTION delivery_failed(p_intent_ids bigint[]) RETURNS integer LANGUAGE sql AS 'SELECT 0';"
        " DELETE FROM schema_migrations WHERE version = '052'"
    )
    assert migrations.migrate(upgraded).migrations == ("052",)
    assert snapshot(upgraded) == snapshot(fresh)


def test_every_function_and_view_of_the_schema_has_a_definition_file(new_database):
    db = new_database()
    migrations.migrate(db)
    objects = {name for name, _ in db.run(SNAPSHOT["functions"])} | {name for name, _ in db.run(SNAPSHOT["views"])}
    assert objects == {d.name for d in migrations.discover_definitions()}


def section(name: str, body: str) -> str:
    return f"-- name: {name}\n{body}\n"


V = section("v", "CREATE OR REPLACE VIEW v AS SELECT * FROM t;")
F1 = section("f", "CREATE OR REPLACE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1';")
F2 = section("f", "CREATE OR REPLACE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 2';")


@pytest.fixture
def defs_dir(tmp_path: Path) -> Path:
    """A table, the definitions' bookkeeping migration and two definitions, one a `SELECT *` view."""
    folder = tmp_path / "sql"
    write(folder, "001_table.sql", "CREATE TABLE t (a int, b int); INSERT INTO t VALUES (1, 2);")
    write(folder, "002_definitions.sql", (PACKAGED / "004_schema_definitions.sql").read_text())
    write(folder, DEFS, "-- the folder's functions\n" + V + F1)
    return folder


def test_a_changed_definition_is_re_applied_alone_and_an_unchanged_one_never(new_database, defs_dir):
    db = new_database()
    assert migrations.migrate(db, defs_dir).definitions == ("v", "f")
    assert migrations.migrate(db, defs_dir) == migrations.MigrationRun()
    write(defs_dir, DEFS, V + F2)
    assert migrations.migrate(db, defs_dir) == migrations.MigrationRun((), ("f",))
    assert db.run("SELECT f()") == [[2]]


def test_a_migration_re_applies_every_definition_so_a_select_star_view_sees_new_columns(new_database, defs_dir):
    db = new_database()
    migrations.migrate(db, defs_dir)
    write(defs_dir, "003_column.sql", "ALTER TABLE t ADD COLUMN c int DEFAULT 3;")
    assert migrations.migrate(db, defs_dir) == migrations.MigrationRun(("003",), ("v", "f"))
    assert db.rows("SELECT * FROM v") == [{"a": 1, "b": 2, "c": 3}]


def test_a_migration_may_drop_a_view_to_change_its_columns_and_the_definition_recreates_it(new_database, defs_dir):
    db = new_database()
    migrations.migrate(db, defs_dir)
    write(defs_dir, "003_retype.sql", "DROP VIEW v; ALTER TABLE t ALTER COLUMN b TYPE text;")
    migrations.migrate(db, defs_dir)
    assert db.run("SELECT data_type FROM information_schema.columns WHERE table_name = 'v' AND column_name = 'b'") == [
        ["text"]
    ]


def test_a_failing_definition_rolls_back_the_migrations_of_its_run(new_database, defs_dir):
    db = new_database()
    write(defs_dir, DEFS, V + F1 + section("w", "CREATE OR REPLACE VIEW w AS SELECT no_such_column FROM t;"))
    with pytest.raises(MigrationError, match=r"definition functions/defs.sql:w failed: .*no_such_column"):
        migrations.migrate(db, defs_dir)
    assert db.run("SELECT to_regclass('t'), to_regclass('v')") == [[None, None]]
    assert db.run("SELECT count(*)::int FROM schema_migrations") == [[0]]


def test_a_new_version_replaces_the_old_one_which_the_runner_drops(new_database, defs_dir):
    """A changed signature is a new name: the old version is dropped with no DROP written anywhere."""
    db = new_database()
    migrations.migrate(db, defs_dir)
    f_v2 = section("f_v2", "CREATE OR REPLACE FUNCTION f_v2(p int) RETURNS int LANGUAGE sql AS 'SELECT p';")
    write(defs_dir, DEFS, V + f_v2)
    assert migrations.migrate(db, defs_dir) == migrations.MigrationRun((), ("f_v2",), ("f",))
    assert db.run("SELECT to_regproc('f'), f_v2(7)") == [[None, 7]]
    assert db.run("SELECT name FROM schema_definitions ORDER BY name") == [["f_v2"], ["v"]]
    write(defs_dir, DEFS, f_v2)  # a view retired the same way
    assert migrations.migrate(db, defs_dir).retired == ("v",)
    assert db.run("SELECT to_regclass('v')") == [[None]]


def test_a_changed_signature_under_the_same_name_is_refused(new_database, defs_dir):
    db = new_database()
    migrations.migrate(db, defs_dir)
    write(
        defs_dir,
        DEFS,
        V + section("f", "CREATE OR REPLACE FUNCTION f(p int) RETURNS int LANGUAGE sql AS 'SELECT p';"),
    )
    with pytest.raises(MigrationError, match=r"functions/defs.sql:f leaves 2 functions named f: .*new name \(f_v2"):
        migrations.migrate(db, defs_dir)
    assert db.run("SELECT f()") == [[1]]  # rolled back: the old one stands alone


def test_a_definition_must_create_the_object_it_is_named_after(new_database, defs_dir):
    write(
        defs_dir,
        DEFS,
        V + section("g", "CREATE OR REPLACE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1';"),
    )
    with pytest.raises(MigrationError, match="functions/defs.sql:g creates no function or view named g"):
        migrations.migrate(new_database(), defs_dir)


def test_a_retired_definition_leaves_an_extensions_objects_and_other_schemas_alone(new_database, defs_dir):
    db = new_database()
    migrations.migrate(db, defs_dir)
    db.execute_script("CREATE SCHEMA other; CREATE FUNCTION other.f() RETURNS int LANGUAGE sql AS 'SELECT 9';")
    write(defs_dir, DEFS, V)
    assert migrations.migrate(db, defs_dir).retired == ("f",)
    assert db.run("SELECT to_regproc('public.f'), other.f()") == [[None, 9]]


def test_a_folders_files_apply_in_name_order_and_a_moved_section_is_not_re_applied(new_database, defs_dir):
    """A SQL function's body is checked when it is created: the file that defines what it calls comes
    first by name. A section is recorded by its object, so moving it to another file changes nothing."""
    db = new_database()
    g = section("g", "CREATE OR REPLACE FUNCTION g() RETURNS int LANGUAGE sql AS 'SELECT f() + 1';")
    write(defs_dir, DEFS, V)
    write(defs_dir, "functions/10_f.sql", F1)
    write(defs_dir, "functions/20_g.sql", g)
    assert migrations.migrate(db, defs_dir).definitions == ("f", "g", "v")
    assert db.run("SELECT g()") == [[2]]
    (defs_dir / "functions/10_f.sql").unlink()
    write(defs_dir, "functions/20_g.sql", F1 + "\n" + g)
    assert migrations.migrate(db, defs_dir) == migrations.MigrationRun()
    write(defs_dir, "functions/05_g.sql", g)
    write(defs_dir, "functions/20_g.sql", F1)
    with pytest.raises(MigrationError, match=r"definition functions/05_g.sql:g failed: .*f\(\) does not exist"):
        migrations.migrate(new_database(), defs_dir)


def test_definitions_need_the_bookkeeping_migration(new_database, defs_dir):
    (defs_dir / "002_definitions.sql").unlink()
    with pytest.raises(MigrationError, match="has definitions but no migration creates schema_definitions"):
        migrations.migrate(new_database(), defs_dir)


@pytest.mark.parametrize(
    "text, message",
    [
        (F1 + F2, "functions/defs.sql:3: section 'f' is given twice"),
        ("-- name: Not_lower\nSELECT 1;\n", "a section name is a lower-case identifier"),
        ("-- name: empty\n\n", "section 'empty' is empty"),
    ],
)
def test_badly_written_definitions_are_refused(defs_dir, text, message):
    write(defs_dir, DEFS, text)
    with pytest.raises(ValueError, match=message):
        migrations.discover_definitions(defs_dir)
