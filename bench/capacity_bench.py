#!/usr/bin/env python3
"""Requests per second per database connection and per vCPU, for create, confirm and the read path,
side by side in one run: one request per instance (THREADS=1, one connection), eight at once
(THREADS=8, a connection per thread), and eight at once sharing a pool of two connections statement by
statement (a per-instance pool: bench/capacity_app.py, BENCH_POOL_SIZE=2; measured, not shipped).
docs/capacity.md sizes Cloud Run's concurrency, the instance caps and the connection budget from them.

    .venv/bin/python bench/capacity_bench.py [--quick] [--write-docs]

Each shape is the create and the confirm target under functions-framework's real server (gunicorn, one
worker, THREADS threads; functions/main.py as deployed), all six running at once against one database,
and each cell's clients as many as the shape's threads (keep-alive, in this process). Per cell: the
answers per second, latency, the connections the instance held, the server's CPU per request (its
process tree, from /proc: what a Cloud Run instance's one vCPU would spend) and the database backends'
CPU per request. Per vCPU = 1 / CPU per request, the rate at which that CPU alone would be saturated;
per connection = answers per second / connections held. The 2 cores are shared by clients, servers and
PostgreSQL, so absolute rates are this machine's; the CPU per request and the ratios between shapes,
measured in the same rounds, are what carries over.
"""

from __future__ import annotations

import http.client
import json
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import psutil

import common
import history_seed
from common import fresh_database, log, machine, median, quiet_round, server
from cost_bench import CapturingSender
from create_bench import free_port, pct
from pgcost import backend_cpu_us
from provider_http import serve, stop
from signup_verification.api.create import create_verification
from signup_verification.api.models import CreateVerificationRequest
from signup_verification.operations.dispatcher import Dispatcher, DispatchRun
from support.config import make_config
from support.paths import TEST_TOKEN_KEYS

SECTION = "capacity-bench"
APP = Path(__file__).resolve().parent / "capacity_app.py"  # functions/main.py's targets, the pool beside
SHAPES = {  # label -> (THREADS, DATABASE_POOL_SIZE)
    "1 per instance": (1, None),
    "8 per instance": (8, None),
    "8 per instance, pool of 2": (8, 2),
}
PATHS = ("create", "confirm", "read")
TARGETS = {"create": "create_verification", "confirm": "confirm_verification", "read": "create_verification"}


def settings(database_url: str, deployment: str, threads: int, pool: int | None) -> dict[str, str]:
    env = {
        "DATABASE_URL": database_url,
        "TOKEN_KEYS": TEST_TOKEN_KEYS,
        "ENVIRONMENT": "local",
        "DEPLOYMENT": deployment,  # names the connections: signup-verification:<deployment>
        "LOG_LEVEL": "WARNING",
        "WORKERS": "1",
        "THREADS": str(threads),
        "RATE_LIMIT_PER_HOUR": "1000000",
        "RATE_LIMIT_SPACING_SECONDS": "0",
        "RATE_LIMIT_ACCOUNT_PER_HOUR": "1000000",
        "RATE_LIMIT_CLIENT_PER_HOUR": "1000000",
        "BENCH_POOL_SIZE": "" if pool is None else str(pool),
    }
    return env


class Served:
    """One shape: its create and confirm targets, and what they cost so far."""

    def __init__(self, label: str, database_url: str, n: int):
        self.label = label
        self.threads, self.pool = SHAPES[label]
        # each target its own DEPLOYMENT, so its connections carry a name of their own
        self.deployments = {target: f"cap{n}-{target[:3]}" for target in set(TARGETS.values())}
        self.ports = {target: free_port() for target in self.deployments}
        self.procs = {
            target: serve(
                target, port, settings(database_url, self.deployments[target], self.threads, self.pool), source=APP
            )
            for target, port in self.ports.items()
        }

    def cpu_us(self, target: str) -> float:
        """The target's process tree (functions-framework's master and its worker), CPU so far."""
        root = psutil.Process(self.procs[target].pid)
        total = 0.0
        for proc in [root, *root.children(recursive=True)]:
            try:
                times = proc.cpu_times()
                total += (times.user + times.system) * 1e6
            except psutil.NoSuchProcess:
                pass
        return total

    def stop(self) -> None:
        for proc in self.procs.values():
            stop(proc)


def backends(monitor, deployment: str) -> list[int]:
    """The backends of the connections the target opened (named signup-verification:<its deployment>)."""
    rows = monitor.run(
        "SELECT pid FROM pg_stat_activity WHERE application_name = :a AND backend_type = 'client backend'",
        a=f"signup-verification:{deployment}",
    )
    return [r[0] for r in rows]


def prepare(db, n: int, tag: str) -> list[tuple[uuid.UUID, str]]:
    """`n` email verifications created and delivered in this process: each one's id and link token."""
    config = make_config(
        deployment="bench-prep",
        token_keys=TEST_TOKEN_KEYS,
        email_from="Signup <no-reply@example.org>",
        function_timeout_seconds=3600,
        rate_limit_per_hour=1_000_000,
        rate_limit_spacing_seconds=0,
        rate_limit_account_per_hour=1_000_000,
        rate_limit_client_per_hour=1_000_000,
        **common.UNPACED,
    )
    from signup_verification.verifications.tokens import Keyring

    keyring = Keyring.parse(TEST_TOKEN_KEYS)
    ids = {}
    for i in range(n):
        destination = f"{tag}{i}@example.com"
        request = CreateVerificationRequest(account_id=f"{tag}{i}", channel="email", destination=destination)
        answer = create_verification(db, config.create, keyring, request, f"{tag}{i}")
        ids[destination] = uuid.UUID(answer.body["verification_id"])
    secrets: dict[str, str] = {}
    Dispatcher(DispatchRun(db, config.dispatch, keyring, {"email": CapturingSender("email", secrets)})).run()
    return [(ids[to], secrets[to]) for to in ids if to in secrets]


def cell(served: Served, path: str, per_client: int, work, tag: str) -> tuple[float, list[float]]:
    """`served.threads` clients, `per_client` requests each, on `path`: (answers/s, latencies in ms)."""
    clients = served.threads
    port = served.ports[TARGETS[path]]
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors: list[str] = []
    barrier = threading.Barrier(clients + 1)

    def client(i: int) -> None:
        con = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        barrier.wait()
        for j in range(per_client):
            method, url, body, headers = request_of(path, work, f"{tag}-{i}-{j}", i * per_client + j)
            started = time.perf_counter()
            con.request(method, url, body=body, headers=headers)
            answer = con.getresponse()
            payload = answer.read()
            latencies[i].append((time.perf_counter() - started) * 1000)
            if answer.status not in (200, 201):
                errors.append(f"{path} {answer.status} {payload[:200]!r}")
        con.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    if errors:
        raise RuntimeError(f"{len(errors)} failed requests, e.g. {errors[0]}")
    flat = [x for xs in latencies for x in xs]
    return len(flat) / seconds, flat


def request_of(path: str, work, key: str, n: int):
    json_headers = {"Content-Type": "application/json"}
    if path == "create":
        body = {"account_id": key, "channel": "email", "destination": f"{key}@example.com"}
        return "POST", "/", json.dumps(body).encode(), {**json_headers, "Idempotency-Key": key}
    verification_id, token = work[n]
    if path == "confirm":
        return "POST", "/", json.dumps({"token": token}).encode(), json_headers
    return "GET", f"/{verification_id}", None, {}


def idle_ticks(params, ticks: int) -> dict[str, tuple[float, float]]:
    """The scheduler's tick of dispatch and of reconcile on an empty outbox (what a small deployment
    runs all month): {target: (median seconds per tick, server CPU seconds per tick)}."""
    fresh_database(params, "bench_idle").close()
    env = {
        **settings(params.with_database("bench_idle").url(), "cap-idle", 1, None),
        "DISPATCH_IDLE_WAIT": "false",
        "EMAIL_TRANSPORT": "console",
        "SMS_TRANSPORT": "console",
    }
    found = {}
    for target in ("dispatch", "reconcile"):
        port = free_port()
        proc = serve(target, port, env)
        try:
            con = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            seconds, cpu = [], []
            for n in range(ticks + 2):
                root = psutil.Process(proc.pid)
                before = sum(sum(p.cpu_times()[:2]) for p in [root, *root.children(recursive=True)])
                started = time.perf_counter()
                con.request("POST", "/", body=b"{}", headers={"Content-Type": "application/json"})
                answer = con.getresponse()
                answer.read()
                if n >= 2:  # the first two warm the instance
                    seconds.append(time.perf_counter() - started)
                    cpu.append(sum(sum(p.cpu_times()[:2]) for p in [root, *root.children(recursive=True)]) - before)
                if answer.status != 200:
                    raise RuntimeError(f"idle {target} tick answered {answer.status}")
            found[target] = (median(seconds), sum(cpu) / len(cpu))
            con.close()
        finally:
            stop(proc)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = common.arguments(__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=800, help="per cell")
    args = parser.parse_args(argv)
    total, rounds = (16, 1) if args.quick else (args.requests, args.rounds)
    params = server()
    db = fresh_database(params, "bench_capacity")
    db.run(history_seed.UUID_FN)
    history_seed.seed_history(db, 1_000 if args.quick else 20_000)
    per_shape = {label: max(1, total // threads) * threads for label, (threads, _) in SHAPES.items()}
    confirms_needed = sum(4 * threads for threads, _ in SHAPES.values()) + rounds * sum(per_shape.values())
    work = prepare(db, confirms_needed, f"p{time.time_ns()}-")
    log(f"prepared {len(work)} delivered verifications")
    monitor = type(db)(params.with_database("postgres"))
    url = params.with_database("bench_capacity").url()
    shapes = [Served(label, url, n) for n, label in enumerate(SHAPES)]
    figures: dict[tuple[str, str], list[dict[str, float]]] = {}
    loads = []
    try:
        cursor = 0
        for n, shape in enumerate(shapes):  # warm: every thread's connection, its prepared statements, the caches
            for path in PATHS:
                cell(shape, path, 4, work[cursor:] if path == "confirm" else work, f"warm{n}")
            cursor += 4 * shape.threads
        for r in range(rounds):
            round_load, _ = quiet_round()
            loads.append(round_load)
            for s, shape in enumerate(shapes):
                for path in PATHS:
                    target = TARGETS[path]
                    per_client = max(1, total // shape.threads)
                    pids = backends(monitor, shape.deployments[target])
                    cpu, db_cpu = shape.cpu_us(target), {pid: backend_cpu_us(pid) for pid in pids}
                    todo = work[cursor:] if path == "confirm" else work  # a confirm uses its token up
                    rate, lat = cell(shape, path, per_client, todo, f"r{r}s{s}{time.time_ns()}")
                    n = len(lat)
                    if path == "confirm":
                        cursor += n
                    held = backends(monitor, shape.deployments[target])
                    spent = sum(backend_cpu_us(pid) - db_cpu.get(pid, 0.0) for pid in held)
                    figure = {
                        "rate": rate,
                        "p50": pct(lat, 0.5),
                        "p99": pct(lat, 0.99),
                        "cpu": (shape.cpu_us(target) - cpu) / n,
                        "db_cpu": spent / n,
                        "connections": float(len(held)),
                    }
                    figures.setdefault((path, shape.label), []).append(figure)
                    log(
                        f"round {r + 1} {shape.label:<26} {path:<7} {rate:6,.0f}/s p50 {figure['p50']:6.2f} ms "
                        f"server {figure['cpu']:6.0f} µs, db {figure['db_cpu']:5.0f} µs per request, "
                        f"{figure['connections']:.0f} connections"
                    )
    finally:
        for shape in shapes:
            shape.stop()
        monitor.close()
        db.close()
    ticks = idle_ticks(params, 4 if args.quick else 60)
    section = report(figures, machine(params), rounds, total, loads) + tick_lines(ticks)
    common.publish(SECTION, section, args.write_docs)
    return 0


def tick_lines(ticks: dict[str, tuple[float, float]]) -> str:
    """The idle ticks (tools/plan_cost.py bills each at Cloud Run's 100 ms)."""
    lines = [
        "",
        "Idle ticks, one instance (THREADS=1), empty outbox, DISPATCH_IDLE_WAIT off (the small tier's every-minute "
        "ticks; tools/plan_cost.py bills each at least 100 ms, request-based billing's granularity):",
        "",
        "| target | time per tick (median) | server CPU per tick |",
        "|---|---|---|",
    ]
    for target, (seconds, cpu) in ticks.items():
        lines.append(f"| {target} | {seconds * 1000:.0f} ms | {cpu * 1000:.0f} ms |")
    return "\n".join(lines) + "\n"


def report(figures, machine_line: str, rounds: int, total: int, loads: list[str]) -> str:
    lines = [
        "## Requests per database connection and per vCPU (create, confirm, read)",
        "",
        f"`bench/capacity_bench.py`, {datetime.now(UTC):%Y-%m-%d}, {machine_line}. Three shapes of one instance, "
        "each the create and the confirm target under functions-framework's server (gunicorn, 1 worker, THREADS "
        "threads; functions/main.py as deployed), all running at once on one database (20,000 verifications of "
        f"history); clients = the shape's threads, keep-alive, in the same process; ~{total:,} requests per cell, "
        f"{rounds} round(s) with the shapes interleaved, medians. Server CPU: the target's process tree; database "
        "CPU: its backends (both from /proc). Per vCPU = 1 s ÷ CPU per request (the rate at which that CPU alone "
        "saturates); per connection = answers/s ÷ connections held. Loads before each round: "
        f"{', '.join(loads)}.",
        "",
        "| path | shape | answers/s | p50 | p99 | connections | per connection | server CPU / request | per server "
        "vCPU | database CPU / request | per database vCPU |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for path in PATHS:
        for label in SHAPES:
            runs = figures[(path, label)]
            m = {k: median(f[k] for f in runs) for k in runs[0]}
            lines.append(
                f"| {path} | {label} | **{m['rate']:,.0f}** | {m['p50']:.1f} ms | {m['p99']:.1f} ms | "
                f"{m['connections']:.0f} | {m['rate'] / max(m['connections'], 1):,.0f}/s | {m['cpu']:,.0f} µs | "
                f"**{1e6 / m['cpu']:,.0f}/s** | {m['db_cpu']:,.0f} µs | {1e6 / max(m['db_cpu'], 1):,.0f}/s |"
            )
    lines.append("")
    for path in PATHS:
        one, eight, pooled = (median(f["rate"] for f in figures[(path, label)]) for label in SHAPES)
        lines.append(
            f"- {path}: 8 at once answer {eight / one:.2f}x one at a time on the same instance; sharing 2 connections "
            f"they answer {pooled / eight:.2f}x what 8 connections do."
        )
    return "\n".join(lines) + "\n" + "\n" + common.load_line() + "\n"


if __name__ == "__main__":
    sys.exit(main())
