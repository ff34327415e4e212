"""The migration files: where they come from, what they are called, and how a file is split.

Two kinds, both in sql/ (shipped in the package as `signup_verification.sql`, read through
importlib.resources so an installed package finds them from any directory):
- migrations `NNN_name.sql`: tables, indexes, triggers; applied once, in numeric order, frozen after;
- definitions `definitions/NN_name.sql`: functions and views, always the current text, written
  idempotently (CREATE OR REPLACE); re-applied when their checksum changes or a migration ran.
A migration whose first line is `-- migrate: no-transaction` runs outside a transaction, one
statement at a time (CREATE INDEX CONCURRENTLY cannot run inside one).

A migration's statements never change once applied; its comments may be rewritten (they explain
the present). `earlier_checksums.txt` beside the migrations lists the checksums a file had before
its comments were rewritten, so a database that applied it then still upgrades: the runner takes
such a checksum as the file's own and records the current one.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import re
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path

PACKAGE = "signup_verification.sql"
NO_TRANSACTION = "-- migrate: no-transaction"
_MIGRATION = re.compile(r"^(\d{3,})_([a-z0-9_]+)\.sql$")
_DEFINITION = re.compile(r"^(\d{2,})_([a-z0-9_]+)\.sql$")
_DOLLAR_QUOTE = re.compile(r"\$(?:[A-Za-z_][A-Za-z_0-9]*)?\$")


@dataclass(frozen=True)
class Source:
    """A folder of migrations (and optionally `definitions/`): the package's own, or MIGRATIONS_DIR."""

    root: Traversable
    label: str

    @classmethod
    def of(cls, directory: Path | str | None = None) -> Source:
        if directory is None:
            return cls(importlib.resources.files(PACKAGE), f"the installed package ({PACKAGE})")
        return cls(Path(directory), str(directory))


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
    order: int
    name: str  # the recorded key: the file name without its order number
    file: Traversable

    @property
    def filename(self) -> str:
        return f"definitions/{self.file.name}"

    @property
    def text(self) -> str:
        return self.file.read_text(encoding="utf-8")

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.file.read_bytes()).hexdigest()


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
    """definitions/NN_name.sql in order; none when the folder is absent."""
    source = source if isinstance(source, Source) else Source.of(source)
    found = []
    for file in _sql_files(source.root / "definitions"):
        match = _DEFINITION.match(file.name)
        if not match:
            raise ValueError(f"definition file name must look like 01_name.sql: definitions/{file.name}")
        found.append(Definition(int(match.group(1)), match.group(2), file))
    found.sort(key=lambda d: d.order)
    if len({d.order for d in found}) != len(found):
        raise ValueError("two definition files share an order number")
    if len({d.name for d in found}) != len(found):
        raise ValueError("two definition files share a name")
    return found


def fingerprint(source: Source | Path | str | None = None) -> str:
    """A digest of every migration and definition: equal fingerprints, identical migrated schemas."""
    source = source if isinstance(source, Source) else Source.of(source)
    digest = hashlib.sha256()
    items: list[Migration | Definition] = [*discover(source), *discover_definitions(source)]
    for item in items:
        digest.update(item.filename.encode() + b"\0" + item.file.read_bytes() + b"\0")
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
