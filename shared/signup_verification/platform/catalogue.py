"""The one gateway to the package's SQL: each owning package's named-statement catalogue.

A package that owns tables keeps every statement on them in its `queries/` folder, files by concern
(`outbox/queries/claim.sql`, `settle.sql`, ...; oban-py's `oban/queries/*.sql`, river's `dbsqlc/*.sql`),
each a list of named sections:

    -- name: claim
    -- transition: ready, retryable -> claimed, attempting
    -- why: claim (fenced from here on): a live intent is begun in the same statement
    SELECT ...

and its functions and views in its `functions/` folder, sections of the same shape that the migration
runner applies (platform/migration_files.py). A folder's `*.sql` files, read in name order, are one
catalogue: a section name is unique across them (a second one is refused with both places,
file:line). The `-- key: value` lines right under a section's name are its metadata (`transition`
and `why`: outbox/states.py reads them); the statement is the rest of the section, comments included.

Modules look their statements up by name when they are imported (`_CLAIM = OUTBOX["claim"]`), so
an unknown name fails the import, never a first use; the catalogue records which module asked for
which name, and tests/unit/test_catalogues.py holds every section used and every
use defined.
"""

from __future__ import annotations

import importlib.resources
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib.resources.abc import Traversable

__all__ = [
    "DEFINERS", "FUNCTIONS", "OWNERS", "QUERIES", "Catalogue", "Section", "UnknownStatement", "catalogue",
    "parse_sections", "read_folder",
]  # fmt: skip

PACKAGE = "signup_verification"
QUERIES, FUNCTIONS = "queries", "functions"  # an owner's two catalogues: folders of `*.sql` files
# The packages that keep a catalogue of statements (queries/).
OWNERS = ("platform", "outbox", "verifications", "delivery", "operations", "local")
# The owners that keep functions and views (functions/), in the order the migration runner applies
# them (the layers, bottom up). Never `local`: the laptop's emulation is not in the deploy bundle, so
# the migrate job in Google Cloud cannot even import it.
DEFINERS = ("platform", "outbox", "verifications", "delivery")
NAME = "-- name:"


class UnknownStatement(KeyError):
    """A module asked a catalogue for a name it has no section for."""


@dataclass(frozen=True)
class Section:
    name: str
    text: str  # the statement (or, in functions/, the definition), comments included
    meta: Mapping[str, str] = field(default_factory=dict)
    line: int = 0  # where its `-- name:` line is (1-based), for messages
    file: str = ""  # the file it is a section of, e.g. outbox/queries/claim.sql

    @property
    def where(self) -> str:
        """`<file>:<name>`, e.g. outbox/queries/claim.sql:claim: how docs and messages name it."""
        return f"{self.file}:{self.name}"


def parse_sections(text: str, label: str) -> list[Section]:
    """`-- name: x` sections in file order; text before the first one is the file's own comment."""
    sections: list[Section] = []
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(NAME)]
    for n, start in enumerate(starts):
        name = lines[start][len(NAME) :].strip()
        if not name.isidentifier() or name != name.lower():
            raise ValueError(f"{label}:{start + 1}: a section name is a lower-case identifier, got {name!r}")
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        meta: dict[str, str] = {}
        body = start + 1
        while body < end and _is_meta(lines[body]):
            key, value = lines[body][3:].split(":", 1)
            if key in meta:
                raise ValueError(f"{label}:{body + 1}: {key!r} given twice in section {name!r}")
            meta[key] = value.strip()
            body += 1
        statement = "\n".join(lines[body:end]).strip()
        if not statement:
            raise ValueError(f"{label}:{start + 1}: section {name!r} is empty")
        sections.append(Section(name, statement + "\n", meta, start + 1, label))
    return _unique(sections)


def read_folder(folder: Traversable, label: str) -> list[Section]:
    """The sections of every `*.sql` file of a catalogue folder, files in name order, as one list;
    none when there is no such folder. A file without a section, or a name given twice (in one file
    or two), is refused with its place."""
    if not folder.is_dir():
        return []
    sections: list[Section] = []
    for file in sorted((f for f in folder.iterdir() if f.is_file() and f.name.endswith(".sql")), key=lambda f: f.name):
        where = f"{label}/{file.name}"
        found = parse_sections(file.read_text(encoding="utf-8"), where)
        if not found:
            raise ValueError(f"{where}: no `-- name:` section (a catalogue file holds sections only)")
        sections += found
    return _unique(sections)


def _unique(sections: list[Section]) -> list[Section]:
    first: dict[str, Section] = {}
    for s in sections:
        if (earlier := first.setdefault(s.name, s)) is not s:
            raise ValueError(
                f"{s.file}:{s.line}: section {s.name!r} is given twice (first at {earlier.file}:{earlier.line})"
            )
    return sections


_META_KEYS = ("transition", "why")


def _is_meta(line: str) -> bool:
    if not line.startswith("-- "):
        return False
    key, colon, _ = line[3:].partition(":")
    return bool(colon) and key in _META_KEYS


class Catalogue(Mapping[str, str]):
    """One folder's sections, by name; `catalogue[name]` is the statement text."""

    def __init__(self, label: str, sections: list[Section]):
        self.label = label
        self.sections = {s.name: s for s in sections}
        self.used_by: dict[str, set[str]] = {}  # section name -> the package modules that looked it up

    def __getitem__(self, name: str) -> str:
        section = self.sections.get(name)
        if section is None:
            raise UnknownStatement(f"{self.label} has no section named {name!r}")
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller.startswith(PACKAGE + "."):
            self.used_by.setdefault(name, set()).add(caller)
        return section.text

    def __iter__(self) -> Iterator[str]:
        return iter(self.sections)

    def __len__(self) -> int:
        return len(self.sections)


@cache
def catalogue(owner: str, kind: str = QUERIES) -> Catalogue:
    """The named statements of one owning package (`signup_verification/<owner>/queries/*.sql`),
    read once per process; `kind=FUNCTIONS`: its functions and views (the migration runner's)."""
    if owner not in OWNERS:
        raise ValueError(f"{owner!r} keeps no catalogue (owners: {', '.join(OWNERS)})")
    if kind not in (QUERIES, FUNCTIONS):
        raise ValueError(f"a catalogue is {QUERIES!r} or {FUNCTIONS!r}, got {kind!r}")
    label = f"{owner}/{kind}"
    return Catalogue(label, read_folder(importlib.resources.files(f"{PACKAGE}.{owner}") / kind, label))
