#!/usr/bin/env python3
"""Run every benchmark, one question per script, and write each one's section of docs/benchmarks.md.

    .venv/bin/python bench/run.py                 # full runs (~30 min on 2 cores), docs rewritten
    .venv/bin/python bench/run.py --quick         # tiny sizes: keeps the scripts working (CI)
    .venv/bin/python bench/run.py --only create,memory

Each script runs in its own process against the private embedded server (.local/bench-pg, or
BENCH_PG_DIR / BENCH_DATABASE_URL); BENCH_DOC redirects the sections to another file.
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
    "provider": "dispatch_bench.py",  # 200 ms provider, budget respected
    "create": "create_bench.py",  # create path through functions-framework
    "history": "history_bench.py",  # hot and operator paths with 10k vs 1M history
    "latency": "latency_bench.py",  # create -> accepted with the scheduler once a minute
    "memory": "memory_bench.py",  # peak RSS of one invocation, 5,000 intents
    "webhook": "webhook_bench.py",  # issue 12: webhook delivery rate beside email, zero-latency receiver
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default="", help="comma-separated questions: " + ",".join(SCRIPTS))
    parser.add_argument("--no-docs", action="store_true", help="print the sections, do not write them")
    args = parser.parse_args(argv)
    chosen = [q.strip() for q in args.only.split(",") if q.strip()] or list(SCRIPTS)
    unknown = set(chosen) - set(SCRIPTS)
    if unknown:
        parser.error(f"unknown question(s): {', '.join(sorted(unknown))}")
    failed = []
    for question in chosen:
        cmd = [sys.executable, str(BENCH / SCRIPTS[question])]
        cmd += ["--quick"] if args.quick else []
        cmd += [] if args.no_docs else ["--write-docs"]
        started = time.monotonic()
        print(f"== {question}: {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
        code = subprocess.run(cmd, env=os.environ.copy()).returncode
        print(f"== {question}: exit {code} in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
        if code:
            failed.append(question)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
