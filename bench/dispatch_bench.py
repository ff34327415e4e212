#!/usr/bin/env python3
"""Dispatcher with a 200 ms provider: intents/s through one dispatch invocation (claim -> render ->
send -> settle) against concurrency / 0.2 s, the database statements per batch, and whether an
invocation with more work than its budget returns inside it. (Zero-latency throughput, side by side
with the raw-SQL limit and pgqueuer: bench/throughput_bench.py, which imports `run` from here.)
Target: >= 80 % of concurrency / 0.2 s, and no invocation overruns its budget.

And end to end, as a deployment runs it: email verifications created, then one POST to the dispatch
target (functions-framework, every setting at its default) sending through SendGrid's protocol to
a fake answering after 200 ms, against a plain 64-thread client POSTing to the same fake, in the
same run (target: the invocation >= 0.8x the client).

    .venv/bin/python bench/dispatch_bench.py               # full run, prints a report
    .venv/bin/python bench/dispatch_bench.py --quick       # small sizes (keeps the script working)
    .venv/bin/python bench/dispatch_bench.py --write-docs  # also replace its section of docs/benchmarks.md

Intents are seeded with one set-based INSERT (tests/support/fakes/seed.py: the rows create writes; the
create API is slower and its per-destination rate limit does not apply here), 1 in 5 SMS. The
sender is an in-process channel adapter that receives the fully rendered message (token derived,
templates rendered, SMS encoding counted) and accepts it after its latency; the "with MIME" row also
serializes each email the way the SMTP adapter does. Runs on the private embedded server
in .local/bench-pg (or BENCH_DATABASE_URL's server), one fresh database per scenario.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import common  # noqa: E402
from signup_verification.delivery.batch_sizing import LatencyEstimator, invocation_seconds  # noqa: E402
from signup_verification.delivery.channels.base import SendResult  # noqa: E402
from signup_verification.delivery.messages import EmailContent  # noqa: E402
from signup_verification.operations.dispatcher import Dispatcher, DispatchRun  # noqa: E402
from signup_verification.platform.database import ConnectionParams, Database  # noqa: E402
from signup_verification.verifications.tokens import Keyring  # noqa: E402
from support.config import make_config  # noqa: E402
from support.fakes.seed import seed_intents  # noqa: E402
from support.paths import TEST_TOKEN_KEYS  # noqa: E402

KEYRING = Keyring.parse(TEST_TOKEN_KEYS)


class BenchSender:
    """Accepts every message after `latency` seconds (sleeping, as a network wait does)."""

    transport = "bench"

    def __init__(self, channel: str, latency: float, mime: bool = False):
        self.channel = channel
        self.latency = latency
        self.mime = mime

    def send(self, message, deadline: float) -> SendResult:
        if self.mime and isinstance(message, EmailContent):
            message.mime()
        if self.latency:
            time.sleep(self.latency)
        return SendResult.accepted()

    def close(self) -> None:
        pass


class CountingDatabase(Database):
    """Counts statements (round trips) and the wall time spent waiting on them."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.statements = 0
        self.seconds = 0.0

    def run(self, sql, **params):
        self.statements += 1
        started = time.perf_counter()
        try:
            return super().run(sql, **params)
        finally:
            self.seconds += time.perf_counter() - started


BENCH_SMS_MAX = 10_000_000  # SMS_MAX_PER_HOUR above any seeded count: no seeded SMS waits for the next hour


@dataclass(frozen=True)
class Scenario:
    name: str
    intents: int
    latency: float
    concurrency: int
    max_batch: int = 500
    mime: bool = False
    timeout: int = 3600  # FUNCTION_TIMEOUT_SECONDS; short ones have more work than budget

    @property
    def target(self) -> float:
        return 5000.0 if self.latency == 0 else 0.8 * self.concurrency / self.latency


@dataclass(frozen=True)
class Result:
    scenario: Scenario
    accepted: int
    seconds: float
    batches: int
    statements_per_batch: float
    database_seconds: float
    load: float
    elapsed_ms: int = 0
    budget_ms: int = 0

    @property
    def rate(self) -> float:
        return self.accepted / self.seconds


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def server() -> ConnectionParams:
    return common.server()


def fresh_database(params: ConnectionParams, name: str) -> CountingDatabase:
    return common.fresh_database(params, name, CountingDatabase)


def run(params: ConnectionParams, scenario: Scenario) -> Result:
    db = fresh_database(params, "dispatch_bench")
    for first in range(0, scenario.intents, 50_000):
        seed_intents(db, min(50_000, scenario.intents - first), sms_every=5, prefix=f"b{first}", offset=first)
    db.execute_script("ANALYZE")
    settings = make_config(
        deployment="bench",
        token_keys=TEST_TOKEN_KEYS,
        send_concurrency=scenario.concurrency,
        dispatch_max_batch=scenario.max_batch,
        function_timeout_seconds=scenario.timeout,
        email_from="Signup <no-reply@example.org>",
        sms_max_per_hour=BENCH_SMS_MAX,  # every seeded SMS within the global budget (still counted per claim)
        **common.UNPACED,
    )
    channels = {
        "email": BenchSender("email", scenario.latency, scenario.mime),
        "sms": BenchSender("sms", scenario.latency),
    }
    estimator = LatencyEstimator()
    estimator.seed({"email": scenario.latency, "sms": scenario.latency})  # a warm instance
    db.statements, db.seconds = 0, 0.0
    started = time.perf_counter()
    report = Dispatcher(DispatchRun(db, settings.dispatch, KEYRING, channels), estimator=estimator).run()
    seconds = time.perf_counter() - started
    budget = invocation_seconds(settings.dispatch.function_timeout_seconds, settings.dispatch.safety_margin_seconds)
    assert report.accepted == scenario.intents or scenario.timeout < 3600, report  # short budgets leave work
    # Outside the batches: the latency read, the final empty claim, the latency save.
    per_batch = (db.statements - 3) / report.batches
    db.close()
    return Result(
        scenario,
        report.accepted,
        seconds,
        report.batches,
        per_batch,
        db.seconds,
        os.getloadavg()[0],
        report.elapsed_ms,
        int(budget * 1000),
    )


def report(results: list[Result], machine_line: str) -> str:
    lines = [
        "## Dispatcher with a 200 ms provider",
        "",
        f"`bench/dispatch_bench.py`, {datetime.now(UTC):%Y-%m-%d}, {machine_line}. One dispatch "
        "invocation in one process (1 in 5 SMS); the sender is an in-process adapter that receives each fully "
        "rendered message and accepts it after 200 ms (sleeping, as a network wait does). Concurrency is "
        "SEND_CONCURRENCY, the most sends in flight of each channel: email and SMS each have that many, so the rate "
        "can pass one channel's concurrency / 0.2 s (the target is 80 % of it). The short-timeout row "
        "seeds more work than the budget allows: the invocation must return inside "
        "FUNCTION_TIMEOUT_SECONDS minus the safety margin.",
        "",
        "| concurrency (per channel) | FUNCTION_TIMEOUT_SECONDS | intents seeded | accepted | batches | "
        "statements / batch | intents/s | concurrency / 0.2 s | elapsed / budget |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        s = r.scenario
        ok = "ok" if r.rate >= s.target else "MISSED"
        within = "ok" if r.elapsed_ms <= r.budget_ms else "OVERRUN"
        lines.append(
            f"| {s.concurrency} | {s.timeout} | {s.intents:,} | {r.accepted:,} | {r.batches} | "
            f"{r.statements_per_batch:.1f} | **{r.rate:,.0f}** ({ok}) | {s.concurrency / s.latency:,.0f} | "
            f"{r.elapsed_ms / 1000:.1f} s / {r.budget_ms / 1000:.1f} s ({within}) |"
        )
    lines += [
        "",
        "Statements per batch: claim, begin, settle (the heartbeat is written at most every 5 s; "
        "suppressions and lease renewals add one per batch when they happen, never one per intent).",
    ]
    return "\n".join(lines) + "\n"


def scenarios(quick: bool) -> list[Scenario]:
    if quick:
        return [Scenario("200 ms", 80, 0.2, 8), Scenario("200 ms", 400, 0.2, 16, timeout=6)]
    return [
        Scenario("200 ms", 400, 0.2, 8),
        Scenario("200 ms", 1_600, 0.2, 32),
        Scenario("200 ms", 3_200, 0.2, 64),
        Scenario("200 ms", 6_400, 0.2, 128),  # the email default
        Scenario("200 ms", 3_000, 0.2, 32, timeout=20),  # more work than one 15 s budget can send
    ]


def main(argv: list[str] | None = None) -> int:
    parser = common.arguments(__doc__)
    args = parser.parse_args(argv)
    params = server()
    results = []
    for scenario in scenarios(args.quick):
        result = run(params, scenario)
        log(
            f"{scenario.name:>24} c={scenario.concurrency:<3} batch<={scenario.max_batch:<5} "
            f"{result.accepted:>6} in {result.seconds:6.2f}s = {result.rate:8,.0f}/s "
            f"({result.batches} batches, {result.statements_per_batch:.1f} statements/batch)"
        )
        results.append(result)
    section = report(results, common.machine(params))
    import dispatch_e2e  # here: bench/memory_bench.py imports this module and measures what it imports

    section += "\n".join(dispatch_e2e.report(dispatch_e2e.run(params, args.quick))) + "\n"
    common.publish("dispatch-bench", section, args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
