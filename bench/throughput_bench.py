#!/usr/bin/env python3
"""Dispatcher throughput side by side with the raw-SQL limit and pgqueuer, in one run on one server.

Every round runs each contender once on a freshly seeded database, in turn (so machine load drifts
over all of them alike); the figures are medians over the rounds and every ratio is computed per
round, then the median taken. Zero-latency in-process sender, attempt rows written for every intent.

    .venv/bin/python bench/throughput_bench.py [--quick] [--rounds N] [--write-docs] [--profile]
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

import common
import dispatch_bench
import pgqueuer_bench
import raw_sql_bench
from common import UNPACED, load, log, machine, median, server

SECTION = "throughput-bench"


@dataclass(frozen=True)
class Contender:
    name: str
    kind: str  # dispatcher | settle2 | parallel | raw | raw2 | pgqueuer
    batch: int
    processes: int = 1
    consumers: int = 1


CONTENDERS = (
    Contender("dispatcher, 1 invocation, 8 send threads", "dispatcher", 500),
    Contender("dispatcher, 1 invocation, 8 send threads", "dispatcher", 2000),
    Contender("dispatcher, 2 invocations in parallel (2 processes)", "parallel", 500, 2),
    Contender("raw SQL (same claim/start/settle statements, no Python work)", "raw", 500),
    Contender("raw SQL, two-step claim then begin", "raw2", 500),
    Contender("pgqueuer defaults: 1 process x 5 consumers", "pgqueuer", 10, 1, 5),
    Contender("pgqueuer best here: 2 processes x 2 consumers", "pgqueuer", 100, 2, 2),
)


def run_one(params, c: Contender, n: int) -> float:
    if c.kind == "dispatcher":
        result = dispatch_bench.run(params, dispatch_bench.Scenario("zero-latency", n, 0.0, 8, max_batch=c.batch))
        return result.rate
    if c.kind == "parallel":
        return parallel_dispatch(params, n, c.batch, c.processes)
    if c.kind in ("raw", "raw2"):
        return raw_sql_bench.measure(params, n, c.batch, fused=c.kind == "raw")
    return pgqueuer_bench.measure(params, n, c.processes, c.consumers, c.batch)


def _invocation(url: str, batch: int, ready, go, out) -> None:
    """One dispatch invocation in its own process (as two function instances would run)."""
    from signup_verification.delivery.batch_sizing import LatencyEstimator
    from signup_verification.operations.dispatcher import Dispatcher, DispatchRun
    from signup_verification.platform.database import Database
    from support.config import make_config

    db = Database.from_url(url, statement_timeout_ms=600_000)
    db.run("SELECT 1")
    settings = make_config(
        deployment="bench",
        token_keys=dispatch_bench.TEST_TOKEN_KEYS,
        dispatch_max_batch=batch,
        function_timeout_seconds=3600,
        email_from="Signup <no-reply@example.org>",
        sms_max_per_hour=dispatch_bench.BENCH_SMS_MAX,  # every seeded SMS within the global budget (still counted per claim)
        **UNPACED,
    )
    channels = {c: dispatch_bench.BenchSender(c, 0.0) for c in ("email", "sms")}
    estimator = LatencyEstimator()
    estimator.seed({"email": 0.0, "sms": 0.0})
    ready.set()
    go.wait(120)
    report = Dispatcher(DispatchRun(db, settings.dispatch, dispatch_bench.KEYRING, channels), estimator=estimator).run()
    out.put((report.accepted, time.time()))


def parallel_dispatch(params, n: int, batch: int, processes: int) -> float:
    """Intents/s of `processes` concurrent invocations draining one seeded outbox (SKIP LOCKED)."""
    import multiprocessing as mp

    db = dispatch_bench.fresh_database(params, "dispatch_bench")
    for first in range(0, n, 50_000):
        dispatch_bench.seed_intents(db, min(50_000, n - first), sms_every=5, prefix=f"p{first}", offset=first)
    db.execute_script("VACUUM ANALYZE")
    db.close()
    ctx = mp.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    readies = [ctx.Event() for _ in range(processes)]
    url = params.with_database("dispatch_bench").url()
    procs = [ctx.Process(target=_invocation, args=(url, batch, r, go, out), daemon=True) for r in readies]
    for proc in procs:
        proc.start()
    for r in readies:
        r.wait(120)
    started = time.time()
    go.set()
    results = [out.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join(30)
    accepted = sum(r[0] for r in results)
    assert accepted == n, (accepted, n)
    return accepted / (max(r[1] for r in results) - started)


def profile(params, n: int) -> str:
    """pyinstrument over one dispatcher run: where the wall time of the dispatch loop goes."""
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.001)
    profiler.start()
    dispatch_bench.run(params, dispatch_bench.Scenario("zero-latency", n, 0.0, 8))
    profiler.stop()
    return profiler.output_text(unicode=False, color=False, show_all=False)


def main(argv: list[str] | None = None) -> int:
    parser = common.arguments(__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--intents", type=int, default=20_000)
    parser.add_argument("--profile", action="store_true", help="print a pyinstrument profile of one run")
    args = parser.parse_args(argv)
    n, rounds = (1_000, 1) if args.quick else (args.intents, args.rounds)
    params = server()
    missing = pgqueuer_bench.available()
    contenders = [c for c in CONTENDERS if not (missing and c.kind == "pgqueuer")]
    rates: dict[Contender, list[float]] = {c: [] for c in contenders}
    loads = []
    for r in range(rounds):
        for c in contenders:
            rates[c].append(run_one(params, c, n))
            log(f"round {r + 1}/{rounds} {c.name} batch {c.batch}: {rates[c][-1]:,.0f}/s (load {load()})")
        loads.append(float(load()))
    if args.profile:
        print(profile(params, n))
    section = report(rates, n, rounds, machine(params), loads, missing)
    common.publish(SECTION, section, args.write_docs)
    return 0


def report(rates, n: int, rounds: int, machine_line: str, loads: list[float], missing: str | None) -> str:
    contenders = list(rates)
    base = contenders[0]
    ratio = {c: median(b / a for a, b in zip(rates[c], rates[base], strict=True)) for c in contenders}
    lines = [
        "## Dispatcher throughput vs the raw-SQL limit and pgqueuer",
        "",
        f"`bench/throughput_bench.py`, {datetime.now(UTC):%Y-%m-%d}, {machine_line}. "
        f"{n:,} intents (jobs) per run, {rounds} rounds, each contender once per round on a freshly seeded database; "
        f"medians; ratios are per round, then the median. Load average while measuring: "
        f"{min(loads):.1f}-{max(loads):.1f} (2 cores shared with other sessions' test runs).",
        "",
        "| contender | batch | rate (median) | runs | dispatcher (batch 500) ÷ this |",
        "|---|---|---|---|---|",
    ]
    for c in contenders:
        runs = ", ".join(f"{x:,.0f}" for x in rates[c])
        lines.append(f"| {c.name} | {c.batch} | **{median(rates[c]):,.0f}/s** | {runs} | {ratio[c]:.2f}x |")
    # target: two invocations (2 processes) against pgqueuer's best with 2 processes
    best = [c for c in contenders if c.kind == "pgqueuer" and c.batch == 100]
    for kind, what in (("parallel", "Two invocations"), ("parallel2", "Two invocations settling on a 2nd connection")):
        ours_c = [c for c in contenders if c.kind == kind]
        if ours_c and best:
            ours, theirs = rates[ours_c[0]], rates[best[0]]
            per_round = [a / b for a, b in zip(ours, theirs, strict=True)]
            lines += [
                "",
                f"{what} ÷ pgqueuer's best (2 processes × 2 consumers × batch 100), per round: "
                f"{', '.join(f'{x:.2f}x' for x in per_round)}; median **{median(per_round):.2f}x** (target ≥ 1.0x).",
            ]
    if missing:
        lines += ["", f"pgqueuer rows missing: {missing}."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
