#!/usr/bin/env python3
"""Create -> provider-accepted latency with the local Cloud Scheduler emulation firing dispatch once
a minute: the standard tier (two scheduler jobs, 75 s, the idle wait handed over, infra/scheduler.tf;
target p95 <= 0.5 s), the small tier (one job, no idle wait, create nudging dispatch through the
local stand-in of Cloud Tasks, outbox/nudge.py; target p95 <= 3 s), one job with the idle wait and no
idle wait at all, in the same run.

The dispatch target runs in functions-framework's real server (functions/main.py, console email
transport: a zero-latency provider), called by local/scheduler.py on fixed one-minute ticks (one
thread per job; a job's next call waits for its previous one, as Cloud Scheduler's). Verifications are created through verifications.create_verification at random times (about
two a second); the latency of each is the accepted attempt row's observed_at minus the
verification's created_at, both from the database clock (the settle commit, so an upper bound on
when the provider accepted).

    .venv/bin/python bench/latency_bench.py [--quick] [--write-docs]
"""

from __future__ import annotations

import random
import subprocess
import sys
import time
from datetime import UTC, datetime

import common
from common import fresh_database, load, log, machine, quiet_round, server
from create_bench import free_port
from provider_http import serve
from signup_verification.api.create import create_verification
from signup_verification.api.models import CreateVerificationRequest
from signup_verification.config import load as load_config
from signup_verification.local.scheduler import Job, Scheduler
from signup_verification.verifications.tokens import Keyring
from support.paths import TEST_TOKEN_KEYS

SECTION = "latency-bench"
LATENCY_SQL = """
SELECT extract(epoch FROM a.observed_at - v.created_at)
  FROM verifications AS v
  JOIN delivery_intents AS i ON i.verification_id = v.id
  JOIN delivery_attempts AS a ON a.intent_id = i.id AND a.outcome = 'accepted'
 WHERE v.account_id LIKE :tag || '%'
"""


def start_dispatch(url: str, port: int, idle_wait: bool, timeout: int, margin: float) -> subprocess.Popen:
    env = {
        "DATABASE_URL": url,
        "TOKEN_KEYS": TEST_TOKEN_KEYS,
        "ENVIRONMENT": "local",
        "DEPLOYMENT": "bench",
        "EMAIL_TRANSPORT": "console",
        "SMS_TRANSPORT": "console",
        "LOG_LEVEL": "WARNING",
        "FUNCTION_TIMEOUT_SECONDS": str(timeout),
        "DISPATCH_SAFETY_MARGIN_SECONDS": str(margin),
        "DISPATCH_IDLE_WAIT": "true" if idle_wait else "false",
    }
    return serve("dispatch", port, env)


def run(
    params,
    idle_wait: bool,
    seconds: float,
    interval: float,
    timeout: int,
    margin: float,
    tag: str,
    jobs: int = 1,
    nudge: bool = False,
) -> list[float]:
    db = fresh_database(params, "bench_latency")
    url = params.with_database("bench_latency").url()
    port = free_port()
    env = {"DEPLOYMENT": "bench", "TOKEN_KEYS": TEST_TOKEN_KEYS, "RATE_LIMIT_PER_HOUR": "1000"}
    if nudge:  # the local stand-in of Cloud Tasks (platform/tasks.py) posts the bucket's task to dispatch
        env["DISPATCH_NUDGE_URL"] = f"http://127.0.0.1:{port}/"
    settings = load_config(env).create
    keyring = Keyring.parse(TEST_TOKEN_KEYS)
    proc = start_dispatch(url, port, idle_wait, timeout, margin)
    names = ["dispatch", "dispatch-relay"][:jobs]  # infra/scheduler.tf: the tick and the relay job
    scheduler = Scheduler(
        [Job(name, f"http://127.0.0.1:{port}/", interval) for name in names],
        report=lambda line: None,
        timeout_seconds=timeout + 10,
    ).start()
    scheduler.run_now()  # the first tick now, then every interval: steady state from the first create
    rng = random.Random(7)
    try:
        ends = time.monotonic() + seconds
        n = 0
        while time.monotonic() < ends:
            payload = CreateVerificationRequest.model_validate(
                {"account_id": f"{tag}{n}", "channel": "email", "destination": f"{tag}{n}@example.com"}
            )
            create_verification(db, settings, keyring, payload, f"{tag}{n}")
            n += 1
            time.sleep(rng.expovariate(2.0))
        wait_until = time.monotonic() + interval + timeout + 5  # the next invocations pick up the rest
        while time.monotonic() < wait_until and len(db.run(LATENCY_SQL, tag=tag)) < n:
            time.sleep(1)
        latencies = [float(r[0]) for r in db.run(LATENCY_SQL, tag=tag)]
        log(f"idle wait {idle_wait}, nudge {nudge}: {len(latencies)}/{n} accepted (load {load()})")
        return latencies + [float("inf")] * (n - len(latencies))  # never accepted counts as infinitely late
    finally:
        proc.terminate()  # SIGTERM: the invocation releases its claims and answers
        proc.wait(30)
        scheduler.stop()
        db.close()


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main(argv: list[str] | None = None) -> int:
    parser = common.arguments(__doc__)
    parser.add_argument("--seconds", type=float, default=180)
    args = parser.parse_args(argv)
    # (label, idle wait, scheduler jobs, FUNCTION_TIMEOUT_SECONDS, DISPATCH_SAFETY_MARGIN_SECONDS, nudge,
    # target p95): the standard tier (infra: two jobs, 75 s, hand-over), the small tier (one job, no idle
    # wait, create's nudge), one job with the idle wait, neither. quick: a 2 s "minute", only to keep the
    # script working.
    interval = 2.0 if args.quick else 60.0
    seconds = 3 if args.quick else args.seconds
    long = 5 if args.quick else 75
    configs = (
        ("standard tier: 2 jobs, hand-over", True, 2, long, 2.0, False, 0.5),
        ("small tier: 1 job, create nudges", False, 1, long, 2.0, True, 3.0),
        ("1 job, 59 s, idle wait", True, 1, 5 if args.quick else 59, 1.0, False, None),
        ("1 job, no idle wait, no nudge", False, 1, 5 if args.quick else 59, 1.0, False, None),
    )
    params = server()
    rows = []
    for label, idle_wait, jobs, timeout, margin, nudge, target in configs:
        round_load, _ = quiet_round()
        tag = f"{'w' if idle_wait else 'n'}{time.time_ns()}-"
        lat = run(params, idle_wait, seconds, interval, timeout, margin, tag, jobs, nudge)
        rows.append(
            (
                label,
                idle_wait,
                jobs,
                timeout,
                margin,
                nudge,
                target,
                round_load,
                len(lat),
                pct(lat, 0.5),
                pct(lat, 0.95),
                pct(lat, 0.99),
                max(lat),
            )
        )
    lines = [
        "## Create -> provider-accepted latency, scheduler once a minute",
        "",
        f"`bench/latency_bench.py`, {datetime.now(UTC):%Y-%m-%d}, {machine(params)}. "
        f"{seconds:.0f} s of creates (about 2/s, exponential gaps) per row; dispatch through functions-framework, "
        f"called by the scheduler emulation (each job every {interval:.0f} s on fixed ticks, no overlap within "
        "a job, as Cloud Scheduler); DISPATCH_IDLE_POLL_SECONDS=0.25. With two jobs an idle invocation "
        "waits past the tick and hands over to the newer one (outbox/idle.py). With the nudge each create, once "
        "committed, enqueues its time bucket's named task (DISPATCH_NUDGE_SECONDS=1) through the local stand-in "
        "of Cloud Tasks, which POSTs it to the dispatch target at the bucket's end (outbox/nudge.py). "
        "Latency = accepted attempt row's observed_at - verification created_at (database clock).",
        "",
        "| deployment | DISPATCH_IDLE_WAIT | nudge | jobs | timeout / margin | load | creates | p50 | p95 | p99 | max "
        "| target p95 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, idle_wait, jobs, timeout, margin, nudge, target, round_load, n, p50, p95, p99, worst in rows:
        verdict = "" if target is None else f"≤ {target:g} s: {'ok' if p95 <= target else 'MISSED'}"
        lines.append(
            f"| {label} | {str(idle_wait).lower()} | {'yes' if nudge else 'no'} | {jobs} | {timeout} s / {margin:g} s "
            f"| {round_load} | {n} | {p50:.2f} s | **{p95:.2f} s** | {p99:.2f} s | {worst:.2f} s | {verdict} |"
        )
    section = "\n".join(lines) + "\n"
    common.publish(SECTION, section, args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
