"""Ten migrations had their comments rewritten once, after databases had applied them (their statements
never changed): a database stamped with such a file's earlier checksum still upgrades, and is stamped
afresh; any other change is refused. The listing of those checksums is closed: an applied migration is
never edited again (sql/README.md), so it never grows.

Kept, not retired: every database migrated since the rewrite carries the current checksums, but one
last migrated before it carries the earlier ones, and without the listing its next migrate would be
refused for a change that is none (the last test shows such a database upgrading to this release)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from signup_verification.platform import migrations
from signup_verification.platform.migrations import MigrationError


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "sql"
    folder.mkdir()
    (folder / "001_first.sql").write_text("-- the first table\nCREATE TABLE first_table (id integer);\n")
    return folder


def test_an_earlier_checksum_is_taken_as_the_files_own_and_restamped(new_database, tmp_path):
    folder = _copy(tmp_path)
    db = new_database()
    migrations.migrate(db, folder)
    before = (folder / "001_first.sql").read_bytes()
    (folder / "001_first.sql").write_text("-- the one table this test needs\nCREATE TABLE first_table (id integer);\n")
    with pytest.raises(MigrationError, match="changed after it was applied"):
        migrations.migrate(db, folder)
    earlier = hashlib.sha256(before).hexdigest()
    (folder / "earlier_checksums.txt").write_text(f"# comments rewritten\n001_first.sql {earlier}\n")
    migrations.migrate(db, folder)
    [[stamped]] = db.run("SELECT checksum FROM schema_migrations WHERE version = '001'")
    assert stamped == hashlib.sha256((folder / "001_first.sql").read_bytes()).hexdigest()
    migrations.migrate(db, folder)  # and from now on it is simply current


def test_a_malformed_listing_is_refused(tmp_path):
    folder = _copy(tmp_path)
    (folder / "earlier_checksums.txt").write_text("001_first.sql not-a-checksum\n")
    with pytest.raises(ValueError, match="earlier_checksums.txt"):
        migrations.discover(folder)


def test_the_packaged_listing_is_closed_and_names_existing_migrations_only():
    from signup_verification.platform.migration_files import Source, earlier_checksums

    source = Source.of(None)
    names = {m.filename for m in migrations.discover(source)}
    listed = set(earlier_checksums(source))
    assert listed <= names
    assert max(listed) == "016_links_by_id.sql"  # the rewrite's last file: no later migration is ever listed


def test_a_database_stamped_before_the_rewrite_upgrades_to_this_release(new_database):
    from signup_verification.platform.migration_files import Source, earlier_checksums

    db = new_database()
    migrations.migrate(db)
    for name, sums in earlier_checksums(Source.of(None)).items():  # as the database recorded them then
        db.run("UPDATE schema_migrations SET checksum = :c WHERE version = :v", c=min(sums), v=name[:3])
    assert migrations.migrate(db) == migrations.MigrationRun()
    recorded = dict(db.run("SELECT version, checksum FROM schema_migrations"))
    assert recorded == {m.version: m.checksum for m in migrations.discover()}
