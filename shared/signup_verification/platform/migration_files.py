"""The migration files: where they come from, what they are called, and how a file is split.

Two kinds (sql/README.md says how to write each):
- migrations `NNN_name.sql` in sql/ (shipped in the package as `signup_verification.sql`, read
  through importlib.resources so an installed package finds them from any directory): tables,
  indexes, triggers; applied once, in numeric order, and never edited after (the runner refuses a
  changed one);
- definitions: functions and views, always the current text, as `-- name:` sections of each owning
  package's `functions/*.sql` (platform/catalogue.py), applied package by package in the layers'
  order (catalogue.DEFINERS), each folder's files in name order (a numeric prefix puts a definition
  after what it calls), each file's sections in order. A section is re-applied when its checksum
  changes or a migration ran; its name is the one object it creates, and one that changes its
  arguments or result takes a new name (`report_verdicts_v2`): the runner drops the objects of a
  name no section gives any more.
A folder given instead of the package (MIGRATIONS_DIR) holds its migrations and, optionally, a
`functions/` folder of its own, read the same way.
A migration whose first line is `-- migrate: no-transaction` runs outside a transaction, one
statement at a time (CREATE INDEX CONCURRENTLY cannot run inside one).

`earlier_checksums.txt` beside the migrations lists the checksums some of them had before their
comments were rewritten, once: a database that applied one then still upgrades (the runner takes
such a checksum as the file's own and records the current one). It is closed: an applied
migration is never edited again, comments included (tests/integration/platform/test_earlier_checksums.py).
"""

from __future__ import annotations

import hashlib
import importlib.resources
import re
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path

from .catalogue import DEFINERS, FUNCTIONS, read_folder

PACKAGE = "signup_verification.sql"
NO_TRANSACTION = "-- migrate: no-transaction"
_MIGRATION = re.compile(r"^(\d{3,})_([a-z0-9_]+)\.sql$")
SCHEMA = "schema.sql"  # sql/schema.sql: the whole schema in the present tense, beside the migrations
_DOLLAR_QUOTE = re.compile(r"\$(?:[A-Za-z_][A-Za-z_0-9]*)?\$")


@dataclass(frozen=True)
class Source:
    """A folder of migrations: the package's own (its definitions in the owners' functions/), or
    MIGRATIONS_DIR (its definitions in its own functions/, if any)."""

    root: Traversable
    label: str
    package: bool = False

    @classmethod
    def of(cls, directory: Path | str | None = None) -> Source:
        if directory is None:
            return cls(importlib.resources.files(PACKAGE), f"the installed package ({PACKAGE})", package=True)
        return cls(Path(directory), str(directory))

    def definition_folders(self) -> list[tuple[str, Traversable]]:
        """(label, folder) of each functions/ folder, in the order they are applied."""
        if self.package:
            return [
                (f"{o}/{FUNCTIONS}", importlib.resources.files(f"signup_verification.{o}") / FUNCTIONS)
                for o in DEFINERS
            ]
        return [(FUNCTIONS, self.root / FUNCTIONS)]


@dataclass(frozen=True)
class Migration:
    version: str
    name: str
    file: Traversable

    @property
    def filename(self) -> str:
        return self.file.name

    @property
    def text(self) -> str:
        return self.file.read_text(encoding="utf-8")

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.file.read_bytes()).hexdigest()

    earlier_checksums: frozenset[str] = frozenset()  # the same statements, before their comments were rewritten

    @property
    def transactional(self) -> bool:
        return self.text.split("\n", 1)[0].strip() != NO_TRANSACTION


@dataclass(frozen=True)
class Definition:
    name: str  # the recorded key: the one function or view the section creates
    text: str
    origin: str  # the file it is a section of, e.g. outbox/functions/30_events.sql

    @property
    def filename(self) -> str:
        return f"{self.origin}:{self.name}"

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


EARLIER_CHECKSUMS = "earlier_checksums.txt"


def earlier_checksums(source: Source) -> dict[str, frozenset[str]]:
    """`NNN_name.sql <sha256>` lines (`#` starts a comment): file name -> its earlier checksums."""
    listing = source.root / EARLIER_CHECKSUMS
    if not listing.is_file():
        return {}
    found: dict[str, set[str]] = {}
    for line in listing.read_text(encoding="utf-8").splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) != 2 or not _MIGRATION.match(words[0]) or not re.fullmatch(r"[0-9a-f]{64}", words[1]):
            if words:
                raise ValueError(f"{EARLIER_CHECKSUMS}: a line must be 'NNN_name.sql <sha256>', got {line!r}")
            continue
        found.setdefault(words[0], set()).add(words[1])
    return {name: frozenset(sums) for name, sums in found.items()}


def _sql_files(folder: Traversable) -> list[Traversable]:
    if not folder.is_dir():
        return []
    return [f for f in folder.iterdir() if f.is_file() and f.name.endswith(".sql")]


def discover(source: Source | Path | str | None = None) -> list[Migration]:
    """The migrations in numeric order ('1000_x' after '999_y'); a bad or duplicate name is refused."""
    source = source if isinstance(source, Source) else Source.of(source)
    earlier = earlier_checksums(source)
    found = []
    for file in _sql_files(source.root):
        if file.name == SCHEMA:
            continue
        match = _MIGRATION.match(file.name)
        if not match:
            raise ValueError(f"migration file name must look like 001_name.sql: {file.name}")
        found.append(Migration(match.group(1), match.group(2), file, earlier.get(file.name, frozenset())))
    found.sort(key=lambda m: int(m.version))
    numbers = [int(m.version) for m in found]
    if len(set(numbers)) != len(numbers):
        raise ValueError("two migration files share a version number")
    return found


def discover_definitions(source: Source | Path | str | None = None) -> list[Definition]:
    """Every functions/ section in the order it is applied. A folder of migrations may have none; the
    package never lacks an owner's folder (the runner would drop every definition it no longer finds)."""
    source = source if isinstance(source, Source) else Source.of(source)
    found = []
    for label, folder in source.definition_folders():
        if source.package and not folder.is_dir():
            raise ValueError(f"{label} is missing from {source.label}: its functions and views would be dropped")
        found += [Definition(s.name, s.text, s.file) for s in read_folder(folder, label)]
    first: dict[str, Definition] = {}
    for d in found:
        if d.name in first:
            raise ValueError(f"two definitions share a name: {first[d.name].filename} and {d.filename}")
        first[d.name] = d
    return found


def fingerprint(source: Source | Path | str | None = None) -> str:
    """A digest of every migration and definition: equal fingerprints, identical migrated schemas."""
    source = source if isinstance(source, Source) else Source.of(source)
    digest = hashlib.sha256()
    for migration in discover(source):
        digest.update(migration.filename.encode() + b"\0" + migration.file.read_bytes() + b"\0")
    for definition in discover_definitions(source):
        digest.update(definition.filename.encode() + b"\0" + definition.text.encode() + b"\0")
    return digest.hexdigest()


def split_statements(sql: str) -> list[str]:
    """Statements of a no-transaction file, sent one by one: PostgreSQL runs a multi-statement
    query string as one implicit transaction. Knows quotes, dollar quotes and comments."""
    statements: list[str] = []
    start = i = 0
    code = False
    while i < len(sql):
        if sql.startswith("--", i):
            end = sql.find("\n", i)
            i = len(sql) if end < 0 else end + 1
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = len(sql) if end < 0 else end + 2
        elif sql[i] in "'\"":
            i, code = _quoted_end(sql, i), True
        elif (dollar := _DOLLAR_QUOTE.match(sql, i)) is not None:
            end = sql.find(dollar.group(), dollar.end())
            i, code = (len(sql) if end < 0 else end + len(dollar.group())), True
        elif sql[i] == ";":
            if code:
                statements.append(sql[start:i].strip())
            start, code, i = i + 1, False, i + 1
        else:
            code = code or not sql[i].isspace()
            i += 1
    if code:
        statements.append(sql[start:].strip())
    return statements


def _quoted_end(sql: str, i: int) -> int:
    quote, j = sql[i], i + 1
    while True:
        j = sql.find(quote, j)
        if j < 0:
            return len(sql)
        if sql.startswith(quote * 2, j):  # '' and "" escape the quote inside
            j += 2
            continue
        return j + 1
