#!/usr/bin/env python3
"""Run every benchmark, one question per script, and write each one's section of docs/benchmarks.md.

    .venv/bin/python bench/run.py                 # the whole suite (~40 min on 2 cores), docs rewritten
    .venv/bin/python bench/run.py --quick         # tiny sizes: keeps the scripts working (CI)
    .venv/bin/python bench/run.py --only create,memory

Each script runs in its own process against the private embedded server (.local/bench-pg, or
BENCH_PG_DIR / BENCH_DATABASE_URL); BENCH_DOC redirects the sections to another file.

Load: every section ends with the load average sampled while it was measured. A full run waits
before each script, and the scripts with rounds before each round, up to --quiet-wait seconds for
the 1-minute load to fall to --max-load (2); a round still over it is flagged in its table
and skipped from the medians when a quiet round exists. The summary at the top of
docs/benchmarks.md is written by hand from the sections (its table lists each target's section).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
# question -> script; the order puts the CPU-heavy throughput comparison first, on a quiet server
SCRIPTS = {
    "throughput": "throughput_bench.py",  # dispatcher vs raw-SQL limit vs pgqueuer
    "provider": "dispatch_bench.py",  # 200 ms provider, budget respected; the defaults vs a 64-thread client
    "spike": "spike_bench.py",  # 10,000 signups at 200/s through the local emulation with fan-out
    "create": "create_bench.py",  # create path through functions-framework
    "capacity": "capacity_bench.py",  # answers per database connection and per vCPU: create, confirm, read
    "history": "history_bench.py",  # hot and operator paths with 10k vs 1M history
    "latency": "latency_bench.py",  # create -> accepted with the scheduler once a minute
    "memory": "memory_bench.py",  # peak RSS of one invocation, 5,000 intents
    "cost": "cost_bench.py",  # database work per verification vs a pgqueuer job
    "coldstart": "coldstart_bench.py",  # process start -> first 201 vs a trivial function
    "webhook": "webhook_bench.py",  # webhook delivery rate beside email, zero-latency receiver
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default="", help="comma-separated questions: " + ",".join(SCRIPTS))
    parser.add_argument("--no-docs", action="store_true", help="print the sections, do not write them")
    parser.add_argument("--max-load", type=float, default=2.0, help="a round over this 1-minute load is flagged")
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=None,
        help="seconds to wait for the load to fall (default 600; 0 with --quick)",
    )
    args = parser.parse_args(argv)
    wait = args.quiet_wait if args.quiet_wait is not None else (0.0 if args.quick else 600.0)
    env = {**os.environ, "BENCH_MAX_LOAD": str(args.max_load), "BENCH_QUIET_WAIT": str(wait)}
    chosen = [q.strip() for q in args.only.split(",") if q.strip()] or list(SCRIPTS)
    unknown = set(chosen) - set(SCRIPTS)
    if unknown:
        parser.error(f"unknown question(s): {', '.join(sorted(unknown))}")
    failed = []
    for question in chosen:
        cmd = [sys.executable, str(BENCH / SCRIPTS[question])]
        cmd += ["--quick"] if args.quick else []
        cmd += [] if args.no_docs else ["--write-docs"]
        _wait_for_quiet(args.max_load, wait)
        started = time.monotonic()
        print(f"== {question}: {' '.join(cmd[1:])} (load {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)
        code = subprocess.run(cmd, env=env).returncode
        print(f"== {question}: exit {code} in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
        if code:
            failed.append(question)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def _wait_for_quiet(max_load: float, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while os.getloadavg()[0] > max_load and time.monotonic() < deadline:
        time.sleep(5.0)
    if os.getloadavg()[0] > max_load:
        print(f"load {os.getloadavg()[0]:.1f} > {max_load:g}: measuring anyway, flagged", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
