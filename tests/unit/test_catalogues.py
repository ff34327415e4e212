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
from signup_verification.platform.catalogue import DEFINERS, OWNERS, UnknownStatement, catalogue, parse_sections
from signup_verification.platform.migration_files import Source
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
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*.sql"))
    allowed = {f"{owner}/queries.sql" for owner in OWNERS} | {f"{owner}/functions.sql" for owner in DEFINERS}
    assert set(files) <= allowed
    assert all(len(catalogue(owner)) for owner in OWNERS)


def test_the_runner_reads_functions_only_from_packages_the_deploy_bundle_ships():
    """The migrate job runs from the bundle, which leaves the laptop's emulation out: every
    functions.sql the runner reads is in it (a package it lacks fails the job on import)."""
    sys.path.insert(0, str(ROOT / "tools"))
    import build_bundle

    shipped = build_bundle.bundle_files()
    assert [label for label, _ in Source.of().definition_files() if f"signup_verification/{label}" not in shipped] == []


def test_an_unknown_name_fails_where_it_is_looked_up():
    with pytest.raises(UnknownStatement, match="outbox/queries.sql has no section named 'clam'"):
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
    functions.sql), never the migration that once changed it."""
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
