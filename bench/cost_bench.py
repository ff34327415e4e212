#!/usr/bin/env python3
"""Database work per verification: N verifications through create -> deliver (zero-latency adapter)
-> confirm, and what each phase cost the server: WAL bytes (records and full-page images apart),
rows inserted / updated (HOT) / deleted, index entries, row locks, commits, and backend CPU. In the
same run, pgqueuer's per-job figures (one enqueue per job, as one web request would, then draining).

    .venv/bin/python bench/cost_bench.py [--quick] [--rounds N] [--write-docs]

The phases call the domain code the endpoints call (api/create, operations/dispatcher,
verifications/confirm): create and confirm on one connection, the dispatcher on a second one (as
deployed, where it runs in its own instance and switches its session to custom plans); the two
backends' CPU is read from /proc. A CHECKPOINT runs before each round's create phase: the full-page
images are those a workload pays right after a checkpoint (the first change of every page it touches), reported apart from the
records. Autovacuum is off for the measured tables (its work is real, but not per verification).
Median of the rounds, field by field. Embedded server only for the per-type WAL split (pg_waldump).
"""

from __future__ import annotations

import asyncio
import dataclasses
import statistics
import sys
import time
import uuid
from dataclasses import fields
from datetime import UTC, datetime, timedelta

import common
import history_seed
import pgqueuer_bench
from common import log, quiet_round, server
from pgcost import Cost, Meter, flush_stats
from signup_verification import runtime
from signup_verification.api import create as create_edge
from signup_verification.api.models import CreateVerificationRequest
from signup_verification.delivery.batch_sizing import LatencyEstimator
from signup_verification.delivery.channels.base import SendResult
from signup_verification.operations.dispatcher import Dispatcher, DispatchRun
from signup_verification.platform.database import ConnectionParams, Database
from signup_verification.verifications import confirm as confirmations
from signup_verification.verifications.tokens import Keyring
from support.config import make_config
from support.paths import TEST_TOKEN_KEYS
from support.policy import token_in

SECTION = "cost-bench"
KEYRING = Keyring.parse(TEST_TOKEN_KEYS)
SMS_EVERY = 5  # 1 in 5 verifications by SMS (confirmed with the code), the rest by email (the link)
PHASES = ("create", "deliver", "confirm")
WARM_UP = 20  # verifications through every phase before measuring, unmeasured
# Finished verifications seeded before a round (bench/history_seed.py's seed, then VACUUM ANALYZE): the
# measured ones run against tables with history and statistics, as a deployment's do. On an empty,
# never-analysed schema the cached generic plans of the create and confirm functions are the ones a
# 20-row table gets (sequential scans), and they stay cached for the session.
HISTORY = 50_000


class CapturingSender:
    """Zero-latency adapter that keeps each message's secret (link token or code) for the confirm phase."""

    transport = "bench"

    def __init__(self, channel: str, secrets: dict[str, str]):
        self.channel, self.secrets = channel, secrets

    def send(self, message, deadline: float) -> SendResult:
        # what the person has: the code, or the link as the email carries it (the id, then the token)
        self.secrets[message.to] = token_in(message.text) if self.channel == "email" else message.secret
        return SendResult.accepted()

    def close(self) -> None:
        pass


def _quiet_tables(db: Database) -> None:
    for (table,) in db.run("SELECT relname FROM pg_stat_user_tables"):
        db.run(f'ALTER TABLE "{table}" SET (autovacuum_enabled = false)')  # our own table names


def one_round(params: ConnectionParams, n: int) -> dict[str, Cost]:
    name = "bench_cost"
    config = make_config(
        deployment="bench",
        token_keys=TEST_TOKEN_KEYS,
        email_from="Signup <no-reply@example.org>",
        function_timeout_seconds=3600,
        rate_limit_per_hour=100_000,
        rate_limit_spacing_seconds=0,
        rate_limit_account_per_hour=1_000_000,
        rate_limit_prefix_per_hour=10,  # the default: each number's prefix has at most a few creates here
        rate_limit_country_per_hour=1_000_000,  # all +1: the country limit reads every SMS create of the hour
        rate_limit_client_per_hour=1_000_000,
        sms_max_per_hour=1_000_000,
        **common.UNPACED,
    )
    common.fresh_database(params, name).close()
    # create and confirm on a connection set up as their targets' are (runtime.session_settings: generic plans)
    web = dataclasses.replace(config, function_target="confirm")
    db = Database(params.with_database(name), session_settings=runtime.session_settings(web))
    db.run(history_seed.UUID_FN)
    history_seed.seed_history(db, HISTORY if n >= 1000 else 1000)
    _quiet_tables(db)
    monitor = Database(params.with_database("postgres"))
    meter = Meter(monitor, name)
    # The dispatcher on a connection of its own, as deployed (its own function instance): it switches
    # its session to custom plans, which create and confirm, planned for the generic case, never run in.
    dispatch_db = Database(params.with_database(name))
    db.run("SELECT 1")
    dispatch_db.run("SELECT 1")
    pids = meter.backends()
    _phases(db, dispatch_db, meter, pids, config, WARM_UP, "warm")  # plans cached, caches filled: warm instances
    costs = _phases(db, dispatch_db, meter, pids, config, n, "v", checkpoint=monitor)
    db.close()
    dispatch_db.close()
    monitor.close()
    return {phase: cost.per(n) for phase, cost in costs.items()}


def _phases(
    db, dispatch_db, meter, pids, config, n: int, tag: str, checkpoint: Database | None = None
) -> dict[str, Cost]:
    secrets: dict[str, str] = {}
    ids: dict[str, uuid.UUID] = {}
    costs: dict[str, Cost] = {}
    if checkpoint is not None:
        checkpoint.run("CHECKPOINT")
    before = meter.snapshot(pids)
    for i in range(n):
        sms = i % SMS_EVERY == 0
        # Numbers spread over exchanges as sign-ups' numbers are: the prefix limit (the number without its
        # last 4 digits, 10 an hour by default) reads that prefix's recent creates, which a real prefix has
        # few of; all on one exchange, every SMS create read every earlier one. Warm-up numbers apart.
        area = 415 if tag == "v" else 650
        destination = f"+1{area}{200 + (i // SMS_EVERY) % 800}{i:04d}" if sms else f"{tag}{i}@example.org"
        request = CreateVerificationRequest(
            account_id=f"{tag}-{i}", channel="sms" if sms else "email", destination=destination
        )
        answer = create_edge.create_verification(db, config.create, KEYRING, request, f"{tag}-{i}")
        assert answer.status == 201, answer
        ids[destination] = uuid.UUID(str(answer.body["verification_id"]))
    flush_stats(db)
    costs["create"] = meter.since(before, pids)

    channels = {c: CapturingSender(c, secrets) for c in ("email", "sms")}
    estimator = LatencyEstimator()
    estimator.seed({"email": 0.0, "sms": 0.0})
    before = meter.snapshot(pids)
    report = Dispatcher(DispatchRun(dispatch_db, config.dispatch, KEYRING, channels), estimator=estimator).run()
    flush_stats(dispatch_db)
    costs["deliver"] = meter.since(before, pids)
    assert report.accepted == n, report

    before = meter.snapshot(pids)
    for destination, verification_id in ids.items():
        secret = secrets[destination]
        if destination.startswith("+"):
            outcome = confirmations.confirm_code(db, KEYRING, verification_id, secret)
        else:
            outcome = confirmations.confirm_link(db, KEYRING, secret)
        assert outcome.is_verified, outcome
    flush_stats(db)
    costs["confirm"] = meter.since(before, pids)
    return costs


async def _pgqueuer_round(params: ConnectionParams, n: int, consumers: int, batch: int) -> dict[str, Cost]:
    """pgqueuer on its own fresh database: n single enqueues on one connection, then drained."""
    from pgqueuer.adapters.drivers.asyncpg import AsyncpgDriver
    from pgqueuer.core.qm import QueueManager
    from pgqueuer.queries import Queries
    from pgqueuer.types import QueueExecutionMode

    name = "bench_pgqueuer"
    common.fresh_database(params, name, migrate=False).close()
    target = params.with_database(name)
    monitor = Database(params.with_database("postgres"))
    meter = Meter(monitor, name)
    con = await pgqueuer_bench._connect(target)
    queries = Queries(AsyncpgDriver(con))
    await queries.install()
    for (table,) in await con.fetch("SELECT relname FROM pg_stat_user_tables"):
        await con.execute(f'ALTER TABLE "{table}" SET (autovacuum_enabled = false)')
    costs: dict[str, Cost] = {}
    for _ in range(WARM_UP):  # its statements prepared on this connection, as ours are; then taken away
        await queries.enqueue("noop", None, 0)
    await con.execute("DELETE FROM pgqueuer")
    monitor.run("CHECKPOINT")
    pids = meter.backends()
    before = meter.snapshot(pids)
    for _ in range(n):
        await queries.enqueue("noop", None, 0)
    await con.execute("SELECT pg_stat_force_next_flush()")
    await con.execute("SELECT 1")
    costs["enqueue"] = meter.since(before, pids)
    await con.close()

    managers, connections = [], []
    for _ in range(consumers):
        c = await pgqueuer_bench._connect(target)
        qm = QueueManager(Queries(AsyncpgDriver(c)))

        @qm.entrypoint("noop")
        async def noop(job) -> None:
            return None

        managers.append(qm)
        connections.append(c)
    pids = meter.backends()
    before = meter.snapshot(pids)
    await asyncio.gather(
        *(
            qm.run(batch_size=batch, mode=QueueExecutionMode.drain, log_aggregation_interval=timedelta(0))
            for qm in managers
        )
    )
    for c in connections:
        await c.execute("SELECT pg_stat_force_next_flush()")
        await c.execute("SELECT 1")
    costs["process"] = meter.since(before, pids)
    for c in connections:
        await c.close()
    monitor.close()
    return {phase: cost.per(n) for phase, cost in costs.items()}


def pgqueuer_round(params: ConnectionParams, n: int, consumers: int = 5, batch: int = 10) -> dict[str, Cost] | None:
    if pgqueuer_bench.available():
        return None
    return asyncio.run(_pgqueuer_round(params, n, consumers, batch))


def median_cost(costs: list[Cost]) -> Cost:
    scalar = {f.name: statistics.median(getattr(c, f.name) for c in costs) for f in fields(Cost) if f.name != "by_type"}
    kinds = set().union(*(c.by_type for c in costs))
    by_type = {
        k: tuple(statistics.median(c.by_type.get(k, (0, 0, 0))[i] for c in costs) for i in range(3)) for k in kinds
    }
    return Cost(**scalar, by_type=by_type)


def total(phases: dict[str, Cost]) -> Cost:
    out = Cost()
    for cost in phases.values():
        out = out + cost
    return out


# -- the report ------------------------------------------------------------------------------------
TARGETS = {"wal": 4096, "commits": 2, "cpu": 400}  # per verification, create -> deliver -> confirm


def _row(label: str, c: Cost, bold: bool = False) -> str:
    b = "**" if bold else ""
    return (
        f"| {label} | {b}{c.wal_bytes:,.0f}{b} | {c.record_bytes:,.0f} | {c.fpi_bytes:,.0f} | "
        f"{c.wal_records:.1f} | {c.rows_inserted:.2f} | {c.rows_updated:.2f} ({c.rows_hot_updated:.2f}) | "
        f"{c.rows_deleted:.2f} | {c.index_entries:.1f} | {c.row_locks:.2f} | {b}{c.commit_records:.2f}{b} | "
        f"{c.transactions:.2f} | {b}{c.cpu_us:,.0f}{b} |"
    )


def _verdict(value: float, target: float) -> str:
    return "ok" if value <= target else "MISSED"


def report(
    phases: dict[str, Cost],
    queue: dict[str, Cost] | None,
    n: int,
    rounds: int,
    loads: list[str],
    machine_line: str,
    queue_shape: str,
) -> str:
    whole = total(phases)
    lines = [
        "## Database work per verification (create -> deliver -> confirm)",
        "",
        f"`bench/cost_bench.py`, {datetime.now(UTC):%Y-%m-%d}, {machine_line}. {n:,} verifications per round "
        f"(1 in {SMS_EVERY} SMS confirmed with the code, the rest by email confirmed with the link), {rounds} "
        "round(s), median per figure over the rounds under the load limit (all of them if none is); create and confirm on one connection, delivery on a second (as deployed: its custom-plan session setting stays its own); both backends' CPU read from /proc, "
        "the domain code the endpoints call, a zero-latency adapter. CHECKPOINT before the create phase: the "
        "full-page images are those paid after a checkpoint. Each round starts from 50,000 finished verifications of history (VACUUM ANALYZE), autovacuum then off for the measured tables. "
        f"Load average per round: {', '.join(loads)}.",
        "",
        "| per verification | WAL bytes | record bytes | full-page image bytes | WAL records | rows inserted | "
        "rows updated (HOT) | rows deleted | index entries | row locks | commits (WAL) | transactions | "
        "backend CPU µs |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_row(phase, phases[phase]) for phase in PHASES]
    lines.append(_row("**whole verification**", whole, bold=True))
    if queue:
        lines += [_row(f"pgqueuer {phase} (per job)", cost) for phase, cost in queue.items()]
        lines.append(_row("**pgqueuer job**", total(queue), bold=True))
    commits = " + ".join(f"{phases[p].commit_records:.2f} {p}" for p in PHASES)
    lines += [
        "",
        f"Targets (per verification): WAL ≤ 4 KB: {whole.wal_bytes:,.0f} B "
        f"({_verdict(whole.wal_bytes, TARGETS['wal'])}); commits ≤ 2: {whole.commit_records:.2f} = {commits} "
        f"({_verdict(round(whole.commit_records, 1), TARGETS['commits'])}: a batch's commit is shared by its "
        f"intents); backend CPU ≤ 400 µs: {whole.cpu_us:,.0f} µs ({_verdict(whole.cpu_us, TARGETS['cpu'])}).",
        f"Capacity inputs (docs/capacity.md): one vCPU of backend time carries {1e6 / max(whole.cpu_us, 1):,.0f} "
        f"verifications/s; one GB of WAL holds {1e9 / max(whole.wal_bytes, 1):,.0f} verifications "
        f"({whole.wal_bytes * 86_400 / 1e6:,.0f} MB of WAL a day per verification/s).",
    ]
    if queue:
        job = total(queue)
        lines.append(
            f"Against one pgqueuer job ({queue_shape}): {whole.wal_bytes / max(job.wal_bytes, 1):.1f}x the WAL, "
            f"{whole.cpu_us / max(job.cpu_us, 1):.1f}x the backend CPU."
        )
    lines += [
        "",
        "Columns: WAL bytes = the LSN distance over the phase (all WAL written, page headers included); "
        "record / image bytes and every count but rows from pg_waldump over that range (rows inserted/updated from pg_stat_user_tables); index entries = B-tree insert "
        "records; row locks = heap LOCK records (FOR UPDATE, foreign-key checks); commits = commit records "
        "(each one a WAL flush); transactions = pg_stat_database.xact_commit, read-only ones included.",
        "",
        "WAL record types of the whole verification (per verification, largest first):",
        "",
        "| record type | count | record bytes | image bytes |",
        "|---|---|---|---|",
    ]
    top = sorted(whole.by_type.items(), key=lambda kv: -(kv[1][1] + kv[1][2]))[:14]
    lines += [f"| {k} | {v[0]:.2f} | {v[1]:,.0f} | {v[2]:,.0f} |" for k, v in top]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = common.arguments(__doc__)
    parser.add_argument("--rounds", type=int, default=0)
    args = parser.parse_args(argv)
    n = 100 if args.quick else 2_000
    rounds = args.rounds or (1 if args.quick else 3)
    params = server()
    ours: list[dict[str, Cost]] = []
    theirs: list[dict[str, Cost]] = []
    loads, quiet = [], []
    consumers, batch = 5, 10  # pgqueuer's defaults
    for r in range(rounds):
        label, calm = quiet_round()
        loads.append(label)
        quiet.append(calm)
        started = time.monotonic()
        ours.append(one_round(params, n))
        queue = pgqueuer_round(params, n, consumers, batch)
        if queue:
            theirs.append(queue)
        whole = total(ours[-1])
        log(
            f"round {r + 1}: load {label}, {whole.wal_bytes:,.0f} B WAL, {whole.commit_records:.2f} commits, "
            f"{whole.cpu_us:,.0f} µs CPU per verification ({time.monotonic() - started:.0f} s)"
        )
    if any(quiet):  # rounds over the load limit are skipped when a quiet one exists
        ours = [o for o, q in zip(ours, quiet, strict=True) if q]
        theirs = [t for t, q in zip(theirs, quiet, strict=False) if q]
    phases = {p: median_cost([o[p] for o in ours]) for p in PHASES}
    queue_phases = {p: median_cost([t[p] for t in theirs]) for p in ("enqueue", "process")} if theirs else None
    section = report(
        phases,
        queue_phases,
        n,
        rounds,
        loads,
        common.machine(params),
        f"1 process × {consumers} consumers × batch {batch}",
    )
    common.publish(SECTION, section, args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
