"""Helpers shared by the benchmark scripts: the private server, fresh databases, the machine line,
medians and the docs sections each script owns (between <!-- NAME:start --> and <!-- NAME:end -->)."""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import threading
import time
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


# Provider pacing off, for the benches that measure the dispatcher against its own fake senders: the
# default SMS_MAX_PER_SECOND (100, Twilio's fastest sender) would cap a mix of 1 SMS in 5 at ~500/s.
UNPACED = {"email_max_per_second": 1e9, "sms_max_per_second": 1e9}


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


# -- machine load: every section records it; rounds on a busy machine are flagged -------------------
MAX_LOAD = float(os.environ.get("BENCH_MAX_LOAD", "2"))  # a round over this load is flagged
QUIET_WAIT = float(os.environ.get("BENCH_QUIET_WAIT", "0"))  # seconds to wait for a quiet machine per round
_samples: list[float] = []


def _sample_load() -> None:
    while True:
        _samples.append(os.getloadavg()[0])
        time.sleep(2.0)


threading.Thread(target=_sample_load, name="load-sampler", daemon=True).start()


def quiet_round() -> tuple[str, bool]:
    """Before a round: wait up to BENCH_QUIET_WAIT s for the 1-minute load to fall to BENCH_MAX_LOAD.
    Returns (the load, as the tables print it, flagged when over) and whether the round is quiet."""
    deadline = time.monotonic() + QUIET_WAIT
    while os.getloadavg()[0] > MAX_LOAD and time.monotonic() < deadline:
        time.sleep(5.0)
    value = os.getloadavg()[0]
    quiet = value <= MAX_LOAD
    return (f"{value:.1f}" if quiet else f"{value:.1f} (over {MAX_LOAD:g}: flagged)"), quiet


def quiet_only(values: list[float], quiet: list[bool]) -> list[float]:
    """The quiet rounds' values when there are any (a busy round is skipped), else all of them."""
    kept = [v for v, q in zip(values, quiet, strict=True) if q]
    return kept or values


def load_line() -> str:
    """The load average while this process measured (sampled every 2 s), for the section's footer."""
    if not _samples:
        return ""
    worst, middle = max(_samples), statistics.median(_samples)
    note = "" if worst <= MAX_LOAD else f"; **over {MAX_LOAD:g}: noisy, rerun on a quiet machine**"
    return (
        f"Load average (1 min) while measuring: median {middle:.1f}, max {worst:.1f} ({len(_samples)} samples){note}."
    )


def write_section(name: str, section: str) -> None:
    """Replace (or append) this script's section of docs/benchmarks.md."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    footer = load_line()
    block = f"{start}\n{section.rstrip()}\n" + (f"\n{footer}\n" if footer else "") + f"{end}\n"
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n\n"
    if start in text and end in text:
        before, rest = text.split(start, 1)
        after = rest.split(end, 1)[1].lstrip("\n")
        text = before + block + ("\n" + after if after else "")
    else:
        text = text.rstrip("\n") + "\n\n" + block
    DOC.write_text(text)


def arguments(doc: str | None) -> argparse.ArgumentParser:
    """The options every benchmark takes (its own are added to the parser): --quick, tiny sizes that
    keep the script working (CI); --write-docs, rewrite its section of docs/benchmarks.md."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--write-docs", action="store_true")
    return parser


def publish(name: str, section: str, write_docs: bool) -> None:
    """Print a benchmark's section; with --write-docs also write it to docs/benchmarks.md."""
    print(section)
    if write_docs:
        write_section(name, section)
