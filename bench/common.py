"""Helpers shared by the benchmark scripts: the private server, fresh databases, the machine line,
medians and the docs sections each script owns (between <!-- NAME:start --> and <!-- NAME:end -->)."""

from __future__ import annotations

import os
import platform
import statistics
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT / "shared", ROOT / "tests", ROOT):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from signup_verification.local import embedded  # noqa: E402
from signup_verification.platform import migrations  # noqa: E402
from signup_verification.platform.database import ConnectionParams, Database  # noqa: E402

DOC = Path(os.environ.get("BENCH_DOC") or ROOT / "docs" / "benchmarks.md")
BENCH_PG = ROOT / ".local" / "bench-pg"  # never the shared test server (.local/test-pg)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def server() -> ConnectionParams:
    """BENCH_DATABASE_URL's server, else the private embedded one (started once per process)."""
    url = os.environ.get("BENCH_DATABASE_URL")
    if url:
        return ConnectionParams.from_url(url)
    return embedded.start(Path(os.environ.get("BENCH_PG_DIR", BENCH_PG)), stop_at_exit=True)


def fresh_database(
    params: ConnectionParams, name: str, db_class: type[Database] = Database, migrate: bool = True
) -> Database:
    admin = params.with_database("postgres").connect()
    try:
        admin.run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # names are ours, not input
        admin.run(f'CREATE DATABASE "{name}"')
    finally:
        admin.close()
    target = params.with_database(name)
    db = db_class(target, statement_timeout_ms=3_600_000, connector=lambda: target.connect("bench", timeout=3600))
    if migrate:
        migrations.migrate(db)
    return db


def median(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.median(values) if values else float("nan")


def machine(params: ConnectionParams) -> str:
    db = Database(params.with_database("postgres"))
    try:
        version = db.run("SHOW server_version")[0][0]
        knobs = {
            k: db.run(f"SHOW {k}")[0][0]
            for k in ("shared_buffers", "work_mem", "fsync", "synchronous_commit", "max_wal_size")
        }
    finally:
        db.close()
    memory = ""
    try:
        kb = int(next(line for line in open("/proc/meminfo") if line.startswith("MemTotal")).split()[1])
        memory = f", {kb / 1024 / 1024:.0f} GB RAM"
    except (OSError, StopIteration, ValueError):
        pass
    return (
        f"{os.cpu_count()} cores ({platform.machine()}){memory}, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, PostgreSQL {version} (embedded pgserver, same machine, unix socket, "
        f"{', '.join(f'{k}={v}' for k, v in knobs.items())})"
    )


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def write_section(name: str, section: str) -> None:
    """Replace (or append) this script's section of docs/benchmarks.md."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    block = f"{start}\n{section.rstrip()}\n{end}\n"
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n\n"
    if start in text and end in text:
        before, rest = text.split(start, 1)
        after = rest.split(end, 1)[1].lstrip("\n")
        text = before + block + ("\n" + after if after else "")
    else:
        text = text.rstrip("\n") + "\n\n" + block
    DOC.write_text(text)
