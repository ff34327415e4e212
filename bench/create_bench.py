#!/usr/bin/env python3
"""The create path through functions-framework's real server (gunicorn, its default gthread worker):
requests/s and p50/p99 latency at concurrency 1, 8 and 32, database round trips per create, and the
ratio to a trivial endpoint on the same server, measured in the same run.

    .venv/bin/python bench/create_bench.py [--quick] [--write-docs]

Clients are threads with one keep-alive connection each, in this process (they share the 2 cores
with the server and PostgreSQL, which is why the trivial endpoint is measured alongside). Every
create has its own account, destination and Idempotency-Key, so none is rate limited or replayed.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime

import common
from common import ROOT, fresh_database, load, log, machine, median, server
from support.paths import TEST_TOKEN_KEYS

SECTION = "create-bench"
CONCURRENCY = (1, 8, 32)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(database_url: str, port: int) -> subprocess.Popen:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "TOKEN_KEYS": TEST_TOKEN_KEYS,
        "ENVIRONMENT": "local",
        "DEPLOYMENT": "bench",
        "LOG_LEVEL": "WARNING",
        "RATE_LIMIT_PER_HOUR": "1000",
        "FUNCTION_TARGET": "create_verification",
    }
    cmd = [
        str(ROOT / ".venv" / "bin" / "functions-framework"),
        "--source",
        str(ROOT / "bench" / "create_app.py"),
        "--target",
        "create_verification",  # create_app.py's: the real target with the bench's endpoints beside it
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if request(port, "GET", "/ping")[0] == 200:
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("functions-framework did not start: " + proc.stderr.read().decode()[-2000:])


def request(
    port: int,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict | None = None,
    con: http.client.HTTPConnection | None = None,
) -> tuple[int, bytes]:
    own = con is None
    con = con or http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        con.request(method, path, body=body, headers=headers or {})
        response = con.getresponse()
        return response.status, response.read()
    finally:
        if own:
            con.close()


def load_run(port: int, kind: str, concurrency: int, per_client: int, tag: str) -> tuple[float, list[float]]:
    """(requests/s, latencies in ms) of `concurrency` clients each sending `per_client` requests."""
    latencies: list[list[float]] = [[] for _ in range(concurrency)]
    errors: list[str] = []
    barrier = threading.Barrier(concurrency + 1)

    def client(i: int) -> None:
        con = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        barrier.wait()
        for j in range(per_client):
            if kind == "create":
                body = json.dumps(
                    {"account_id": f"{tag}-{i}-{j}", "channel": "email", "destination": f"{tag}-{i}-{j}@example.com"}
                ).encode()
                args = ("POST", "/", body, {"Content-Type": "application/json", "Idempotency-Key": f"{tag}-{i}-{j}"})
            else:
                args = ("GET", "/" + kind, None, None)
            started = time.perf_counter()
            status, payload = request(port, *args, con=con)
            latencies[i].append((time.perf_counter() - started) * 1000)
            if status not in (200, 201):
                errors.append(f"{status} {payload[:200]!r}")
        con.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(concurrency)]
    for t in threads:
        t.start()
    barrier.wait()
    started = time.perf_counter()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - started
    if errors:
        raise RuntimeError(f"{len(errors)} failed requests, e.g. {errors[0]}")
    flat = [x for xs in latencies for x in xs]
    return len(flat) / seconds, flat


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def trips(port: int) -> int:
    return json.loads(request(port, "GET", "/trips")[1])["round_trips"]


def main(argv: list[str] | None = None) -> int:
    parser = common.arguments(__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    requests_total, rounds = (64, 1) if args.quick else (1_600, args.rounds)
    params = server()
    db = fresh_database(params, "bench_create")
    db.run("CREATE TABLE bench_commit_floor (id bigint GENERATED ALWAYS AS IDENTITY, at timestamptz DEFAULT now())")
    db.close()
    port = free_port()
    proc = start_server(params.with_database("bench_create").url(), port)
    try:
        load_run(port, "create", 8, 4, "warm")  # every server thread's connection and prepared statements
        load_run(port, "commit", 8, 4, "warm")
        create_trips, n = 0, 0
        figures: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
        for r in range(rounds):
            for c in CONCURRENCY:
                for kind in ("ping", "commit", "create"):
                    before = trips(port)
                    rate, lat = load_run(port, kind, c, max(1, requests_total // c), f"r{r}c{c}")
                    if kind == "create":
                        n += len(lat)
                        create_trips += trips(port) - before
                    figures.setdefault((kind, c), []).append((rate, pct(lat, 0.5), pct(lat, 0.99)))
                    log(
                        f"round {r + 1} {kind:>6} c={c:<2} {rate:7,.0f}/s p50 {pct(lat, 0.5):6.2f} ms "
                        f"p99 {pct(lat, 0.99):6.2f} ms (load {load()})"
                    )
        per_create = create_trips / n  # /trips never touches the database
    finally:
        proc.terminate()
        proc.wait(10)
    section = report(figures, per_create, machine(params), rounds, requests_total)
    common.publish(SECTION, section, args.write_docs)
    return 0


def report(figures, per_create: float, machine_line: str, rounds: int, total: int) -> str:
    lines = [
        "## Create path through functions-framework's server",
        "",
        f"`bench/create_bench.py`, {datetime.now(UTC):%Y-%m-%d}, {machine_line}. "
        "`functions-framework --target` (gunicorn, 1 worker, its default 8 threads on 2 cores, one database "
        f"connection per thread), clients in the same machine over loopback with keep-alive; ~{total:,} requests "
        f"per cell, {rounds} rounds, medians. The trivial endpoint (`GET /ping`, JSON, no database) runs on the "
        "same server in the same round.",
        "",
        "| concurrency | create req/s | create p50 | create p99 | one committed INSERT p50 | trivial req/s | "
        "trivial p50 | trivial p99 | create ÷ trivial (req/s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in CONCURRENCY:
        cr, tr, fl = figures[("create", c)], figures[("ping", c)], figures[("commit", c)]
        ratio = median(a[0] / b[0] for a, b in zip(cr, tr, strict=True))
        lines.append(
            f"| {c} | **{median(x[0] for x in cr):,.0f}** | {median(x[1] for x in cr):.1f} ms | "
            f"{median(x[2] for x in cr):.1f} ms | {median(x[1] for x in fl):.1f} ms | {median(x[0] for x in tr):,.0f} | "
            f"{median(x[1] for x in tr):.1f} ms | {median(x[2] for x in tr):.1f} ms | {ratio:.2f} |"
        )
    p50 = {k: median(x[1] for x in figures[(k, 1)]) for k in ("create", "ping", "commit")}
    lines += [
        "",
        f"At concurrency 1 (target: create p50 ≤ 2x the trivial endpoint): create {p50['create']:.2f} ms "
        f"= **{p50['create'] / p50['ping']:.2f}x** the trivial endpoint's {p50['ping']:.2f} ms. The floor under it: "
        f"the same server answering after one INSERT committed on its pool (`GET /commit`: one round trip and the "
        f"commit's WAL flush, no code of ours) takes {p50['commit']:.2f} ms = {p50['commit'] / p50['ping']:.2f}x; "
        f"create's own work (edge, limits, the create function's statements) is the remaining "
        f"{p50['create'] - p50['commit']:.2f} ms.",
        "",
        f"Database round trips per create, counted in the server process (pg8000 socket flushes) over "
        f"every measured create: **{per_create:.2f}** (target ≤ 2; one statement, the `create_verification` "
        "SQL function, in its own implicit transaction).",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
