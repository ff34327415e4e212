"""The package's SQL: one catalogue per owning package (platform/catalogue.py), every section used by
the package's code and every name the code asks for defined, checked when the modules are imported."""

from __future__ import annotations

import importlib
import pathlib
import pkgutil
import re
import sys

import pytest

import signup_verification
from signup_verification.platform.catalogue import (
    DEFINERS,
    FUNCTIONS,
    OWNERS,
    QUERIES,
    UnknownStatement,
    catalogue,
    parse_sections,
    read_folder,
)
from signup_verification.platform.migration_files import Source, discover_definitions
from support.paths import ROOT

# The laptop's entry point runs the CLI when imported; its statements are the CLI's.
_NOT_IMPORTED = {"signup_verification.cli.__main__"}


def _import_every_module() -> list[str]:
    names = []
    for module in pkgutil.walk_packages(signup_verification.__path__, "signup_verification."):
        if module.name not in _NOT_IMPORTED:
            importlib.import_module(module.name)  # an unknown statement name fails here
            names.append(module.name)
    return names


def test_every_section_of_every_catalogue_is_used_by_the_package():
    _import_every_module()
    unused = {owner: sorted(set(catalogue(owner)) - set(catalogue(owner).used_by)) for owner in OWNERS}
    assert {owner: names for owner, names in unused.items() if names} == {}


def test_every_owner_keeps_one_catalogue_and_no_statement_lies_elsewhere():
    root = pathlib.Path(signup_verification.__path__[0])
    folders = {str(p.parent.relative_to(root)) for p in root.rglob("*.sql")}
    allowed = {f"{owner}/{QUERIES}" for owner in OWNERS} | {f"{owner}/{FUNCTIONS}" for owner in DEFINERS}
    assert folders <= allowed
    assert all(len(catalogue(owner)) for owner in OWNERS)


def test_every_sql_file_of_the_package_stays_under_the_length_limit():
    """Files under ~400 lines: a catalogue that grows past that is split by concern into another file."""
    root = pathlib.Path(signup_verification.__path__[0])
    lengths = {str(p.relative_to(root)): len(p.read_text().splitlines()) for p in root.rglob("*.sql")}
    assert {name: n for name, n in lengths.items() if n > 400} == {}


def test_a_folders_files_are_one_catalogue_read_in_name_order(tmp_path: pathlib.Path):
    (tmp_path / "b_settle.sql").write_text("-- settling\n-- name: settle\nSELECT 2\n")
    (tmp_path / "a_claim.sql").write_text("-- name: claim\nSELECT 1\n\n-- name: start\nSELECT 3\n")
    (tmp_path / "notes.md").write_text("-- name: not_sql\n")
    sections = read_folder(tmp_path, "x/queries")
    assert [s.where for s in sections] == [
        "x/queries/a_claim.sql:claim", "x/queries/a_claim.sql:start", "x/queries/b_settle.sql:settle"
    ]  # fmt: skip
    assert [s.line for s in sections] == [1, 4, 2]
    assert read_folder(tmp_path / "absent", "x/functions") == []


def test_a_name_given_in_two_files_is_refused_with_both_places(tmp_path: pathlib.Path):
    (tmp_path / "claim.sql").write_text("-- name: claim\nSELECT 1\n")
    (tmp_path / "settle.sql").write_text("-- the settle file\n\n-- name: claim\nSELECT 2\n")
    with pytest.raises(
        ValueError, match=r"^x/queries/settle.sql:3: section 'claim' is given twice \(first at x/queries/claim.sql:1\)$"
    ):
        read_folder(tmp_path, "x/queries")


def test_a_catalogue_file_without_a_section_is_refused(tmp_path: pathlib.Path):
    (tmp_path / "claim.sql").write_text("-- name: claim\nSELECT 1\n")
    (tmp_path / "stray.sql").write_text("SELECT 2\n")
    with pytest.raises(ValueError, match=r"^x/queries/stray.sql: no `-- name:` section"):
        read_folder(tmp_path, "x/queries")


def test_the_runner_reads_functions_only_from_packages_the_deploy_bundle_ships():
    """The migrate job runs from the bundle, which leaves the laptop's emulation out: every
    functions/ file the runner reads is in it (a package it lacks fails the job on import)."""
    sys.path.insert(0, str(ROOT / "tools"))
    import build_bundle

    shipped = build_bundle.bundle_files()
    read = {d.origin for d in discover_definitions(Source.of())}
    assert {f"{o}/{FUNCTIONS}" for o in DEFINERS} == {origin.rsplit("/", 1)[0] for origin in read}
    assert sorted(o for o in read if f"signup_verification/{o}" not in shipped) == []


def test_a_package_missing_an_owners_functions_folder_is_refused(monkeypatch, tmp_path: pathlib.Path):
    """A package built without a functions/ folder would have the runner drop every definition it holds."""
    monkeypatch.setattr(Source, "definition_folders", lambda self: [("outbox/functions", tmp_path / "absent")])
    with pytest.raises(ValueError, match=r"^outbox/functions is missing from the installed package"):
        discover_definitions(Source.of())


def test_a_definition_two_owners_give_is_refused_with_both_places(monkeypatch, tmp_path: pathlib.Path):
    for owner in ("outbox", "delivery"):
        (tmp_path / owner).mkdir()
        (tmp_path / owner / "10_f.sql").write_text(
            "-- name: f\nCREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1';\n"
        )
    folders = [(f"{o}/functions", tmp_path / o) for o in ("outbox", "delivery")]
    monkeypatch.setattr(Source, "definition_folders", lambda self: folders)
    with pytest.raises(
        ValueError, match=r"share a name: outbox/functions/10_f.sql:f and delivery/functions/10_f.sql:f$"
    ):
        discover_definitions(Source.of())


def test_an_unknown_name_fails_where_it_is_looked_up():
    with pytest.raises(UnknownStatement, match="outbox/queries has no section named 'clam'"):
        catalogue("outbox")["clam"]


def test_sections_carry_their_metadata_and_keep_their_comments():
    [section] = parse_sections(
        "-- the file's own comment\n-- name: claim\n-- transition: ready -> claimed\n-- why: to send it\n"
        "-- what it does\nSELECT 1\n",
        "x.sql",
    )
    assert (section.name, dict(section.meta)) == ("claim", {"transition": "ready -> claimed", "why": "to send it"})
    assert section.text == "-- what it does\nSELECT 1\n" and section.line == 2


TEXT = {".py", ".sql", ".md", ".tf", ".ts", ".yaml", ".yml", ".html", ".txt", ".toml"}
MIGRATION = re.compile(r"sql/0\d\d")


def test_nothing_outside_sql_names_a_migration_by_number():
    """Code and docs name the table, column or function (whose present text is sql/schema.sql or a
    functions/ file), never the migration that once changed it."""
    places = ["shared", "docs", "tools", "bench", "infra", "functions", "clients/python/src", "clients/typescript/src"]
    files = [ROOT / "README.md", ROOT / "dev.py"] + [
        f
        for place in places
        for f in (ROOT / place).rglob("*")
        if f.is_file()
        and f.suffix in TEXT
        and not {"node_modules", "__pycache__"} & set(f.parts)
        and not any(part.endswith(".egg-info") for part in f.parts)
    ]
    naming = sorted(
        f"{f.relative_to(ROOT)}:{n}" for f in files for n, line in enumerate(f.read_text().splitlines(), 1)
        if MIGRATION.search(line)
    )  # fmt: skip
    assert naming == []
