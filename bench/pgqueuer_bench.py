#!/usr/bin/env python3
"""pgqueuer (bench-only dependency) draining no-op jobs on our PostgreSQL server: the reference the
dispatcher's throughput is compared with, in the same run (bench/throughput_bench.py).

Settings as pgqueuer documents them: its defaults are 1 process, 5 consumers (QueueManagers, one
asyncpg connection each), batch 10; its best setting on a 2-core machine is 2 processes x 2 consumers
x batch 100. Jobs are enqueued first; the clock runs from the moment every consumer is connected
(a barrier) until the last one has drained the queue (QueueExecutionMode.drain).

    .venv/bin/python bench/pgqueuer_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import time
from datetime import timedelta

from common import fresh_database, log, server
from signup_verification.platform.database import ConnectionParams


def available() -> str | None:
    """None if pgqueuer and asyncpg import, else why not (the bench extra is not installed)."""
    try:
        import asyncpg  # noqa: F401
        import pgqueuer  # noqa: F401
    except ImportError as exc:
        return f"pgqueuer not installed ({exc.name}): pip install -e '.[bench]'"
    return None


async def _connect(params: ConnectionParams):
    import asyncpg

    host = params.unix_sock.rsplit("/", 1)[0] if params.unix_sock else params.host
    return await asyncpg.connect(
        host=host, port=params.port, user=params.user, password=params.password, database=params.database
    )


async def _prepare(params: ConnectionParams, jobs: int) -> None:
    from pgqueuer.adapters.drivers.asyncpg import AsyncpgDriver
    from pgqueuer.queries import Queries

    con = await _connect(params)
    try:
        queries = Queries(AsyncpgDriver(con))
        await queries.install()
        for first in range(0, jobs, 10_000):
            n = min(10_000, jobs - first)
            await queries.enqueue(["noop"] * n, [None] * n, [0] * n)
    finally:
        await con.close()


async def _consume(params: ConnectionParams, consumers: int, batch: int, ready, go) -> float:
    from pgqueuer.adapters.drivers.asyncpg import AsyncpgDriver
    from pgqueuer.core.qm import QueueManager
    from pgqueuer.queries import Queries
    from pgqueuer.types import QueueExecutionMode

    managers, connections = [], []
    for _ in range(consumers):
        con = await _connect(params)
        qm = QueueManager(Queries(AsyncpgDriver(con)))

        @qm.entrypoint("noop")
        async def noop(job) -> None:  # the no-op job of pgqueuer's own benchmark
            return None

        managers.append(qm)
        connections.append(con)
    ready.set()
    while not go.is_set():
        await asyncio.sleep(0.001)
    await asyncio.gather(
        *(
            qm.run(batch_size=batch, mode=QueueExecutionMode.drain, log_aggregation_interval=timedelta(0))
            for qm in managers
        )
    )
    ended = time.time()
    for con in connections:
        await con.close()
    return ended


def _process(params: ConnectionParams, consumers: int, batch: int, ready, go, ends) -> None:
    try:  # pgqueuer depends on uvloop and its own benchmark runs on it
        import uvloop

        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    ends.put(runner(_consume(params, consumers, batch, ready, go)))


def measure(params: ConnectionParams, jobs: int, processes: int, consumers: int, batch: int) -> float:
    """Jobs/s for draining `jobs` no-op jobs from a fresh database."""
    db = fresh_database(params, "bench_pgqueuer", migrate=False)
    db.close()
    target = params.with_database("bench_pgqueuer")
    asyncio.run(_prepare(target, jobs))
    ctx = mp.get_context("spawn")
    go, ends = ctx.Event(), ctx.Queue()
    readies = [ctx.Event() for _ in range(processes)]
    procs = [ctx.Process(target=_process, args=(target, consumers, batch, r, go, ends), daemon=True) for r in readies]
    for p in procs:
        p.start()
    for r in readies:
        if not r.wait(120):
            raise RuntimeError("a pgqueuer process did not start")
    started = time.time()
    go.set()
    last = max(ends.get(timeout=600) for _ in procs)
    for p in procs:
        p.join(30)
    return jobs / (last - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    reason = available()
    if reason:
        log(reason)
        return
    params = server()
    jobs = 2_000 if args.quick else 50_000
    for p, c, b in ((1, 5, 10), (2, 2, 100)):
        log(f"pgqueuer {p}x{c}x{b}: {measure(params, jobs, p, c, b):,.0f} jobs/s")


if __name__ == "__main__":
    main()
