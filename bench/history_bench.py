#!/usr/bin/env python3
"""Does history slow the hot path or the operator paths? The claim, create, the signals query and a
reconcile sweep with 10,000 vs 1,000,000 finished intents (and their attempt rows) in the tables. Target: within 1.5x.

    .venv/bin/python bench/history_bench.py                 # 10k vs 1M, 9 repeats, prints a report
    .venv/bin/python bench/history_bench.py --quick         # 1k vs 5k, 2 repeats (keeps the script working)
    .venv/bin/python bench/history_bench.py --write-docs    # also replace its section of docs/benchmarks.md

Both sizes run in one process against one PostgreSQL (the embedded server in .local/bench-pg, or
BENCH_DATABASE_URL's server), in two fresh databases, so the ratio is measured in the same run.
History is seeded set-based (bench/history_seed.py: INSERT ... SELECT generate_series); nothing is
disabled: the attempt log's append-only trigger only refuses UPDATE and DELETE. On top of it, every
repeat seeds the same live set (overdue eligible work, abandoned claims, lost leases, ambiguous intents
past their hold, expired pending verifications, expired idempotency keys) and times:
  signals      signals.compute (one statement)
  sweep        one reconcile run that moves the whole live set
  quiet sweep  one reconcile run with nothing to move (the steady state)
EXPLAIN then checks that no statement reads a history table with a sequential scan.
"""

from __future__ import annotations

import base64
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

import common  # noqa: E402  (bench/ is on sys.path when run as a script)
from common import log, server  # noqa: E402
from history_seed import LIVE, fresh_database, remove_live, seed_history, seed_live  # noqa: E402
from signup_verification.api.create import create_verification  # noqa: E402
from signup_verification.api.models import CreateVerificationRequest  # noqa: E402
from signup_verification.config import load  # noqa: E402
from signup_verification.operations import signals  # noqa: E402
from signup_verification.operations.config import ReconcilerConfig  # noqa: E402
from signup_verification.operations.reconciler.runner import reconcile  # noqa: E402
from signup_verification.outbox import transitions  # noqa: E402
from signup_verification.platform.catalogue import catalogue  # noqa: E402
from signup_verification.platform.channels import DELIVERY_CHANNELS  # noqa: E402
from signup_verification.platform.database import Database  # noqa: E402
from signup_verification.verifications.tokens import Keyring  # noqa: E402

TOKEN_KEYS = "bench-k1:" + base64.urlsafe_b64encode(b"b" * 32).decode().rstrip("=")  # throwaway key

CLAIM_BATCH = 100  # of the live set's overdue ready intents
CREATES = 20  # per repeat, each a new account and destination
RETENTION_ROWS = 1000  # per repeat: aged past both retention windows, then redacted and purged
HISTORY_TABLES = ("verifications", "delivery_intents", "delivery_attempts")
DOC = Path(os.environ.get("BENCH_DOC") or ROOT / "docs" / "benchmarks.md")
START, END = "<!-- history-bench:start -->", "<!-- history-bench:end -->"


@dataclass
class Figures:
    history: int
    signals_ms: float
    sweep_ms: float
    quiet_ms: float
    moved: int
    seed_seconds: float
    retention_ms: float = 0.0  # redact then purge RETENTION_ROWS finished verifications
    claim_ms: float = 0.0  # the dispatcher's claim of CLAIM_BATCH eligible intents (hot path)
    create_ms: float = 0.0  # one create_verification call (hot path)


def _config() -> ReconcilerConfig:
    return load({"DEPLOYMENT": "bench", "FUNCTION_TIMEOUT_SECONDS": "540"}).reconciler


def timed(fn) -> tuple[float, object]:
    started = time.perf_counter()
    result = fn()
    return (time.perf_counter() - started) * 1000, result


def measure(db: Database, history: int, repeat: int, seed_seconds: float) -> Figures:
    config = _config()
    signal_ms, sweep_ms, quiet_ms, claim_ms, create_ms, moved = [], [], [], [], [], 0
    signals.compute(db, "bench")  # warm the prepared statements
    for _ in range(repeat):
        live = seed_live(db)
        for _ in range(5):
            signal_ms.append(timed(lambda: signals.compute(db, "bench"))[0])
        ms, report = timed(lambda: reconcile(db, config, emit_signals=False))
        sweep_ms.append(ms)
        moved = sum(v for k, v in report.moves.items() if not k.startswith("suppressed_"))
        quiet_ms.append(timed(lambda: reconcile(db, config, emit_signals=False))[0])
        claim_ms.append(time_claim(db))
        create_ms.extend(time_creates(db, f"hc{history}-{len(create_ms)}-"))
        remove_live(db, live + [r[0] for r in db.run("SELECT id FROM verifications WHERE account_id LIKE 'hc%'")])
    retention_ms = [measure_retention(db, config, r) for r in range(min(repeat, history // RETENTION_ROWS // 2))]
    return Figures(
        history,
        statistics.median(signal_ms),
        statistics.median(sweep_ms),
        statistics.median(quiet_ms),
        moved,
        seed_seconds,
        statistics.median(retention_ms) if retention_ms else 0.0,
        statistics.median(claim_ms),
        statistics.median(create_ms),
    )


def time_claim(db: Database) -> float:
    """The worker's claim of CLAIM_BATCH overdue intents (then released, so the live set is unchanged)."""
    db.run("SELECT set_config('plan_cache_mode', 'force_custom_plan', false)")  # as the dispatcher's session
    ms, claimed = timed(lambda: transitions.claim(db, "bench-claimer", CLAIM_BATCH, 30))
    assert len(claimed) == CLAIM_BATCH, len(claimed)
    transitions.release(db, "bench-claimer", [c.fence for c in claimed])
    return ms


def time_creates(db: Database, tag: str) -> list[float]:
    """CREATES calls of the create path's one SQL function, each a new account and destination."""
    settings = load({"DEPLOYMENT": "bench", "TOKEN_KEYS": TOKEN_KEYS, "RATE_LIMIT_PER_HOUR": "1000"}).create
    keyring = Keyring.parse(TOKEN_KEYS)
    out = []
    for n in range(CREATES):
        payload = CreateVerificationRequest.model_validate(
            {"account_id": f"{tag}{n}", "channel": "email", "destination": f"{tag}{n}@example.com"}
        )
        key = f"{tag}{n}"
        out.append(timed(lambda p=payload, k=key: create_verification(db, settings, keyring, p, k))[0])
    return out


def measure_retention(db: Database, config: ReconcilerConfig, round_: int) -> float:
    """Age RETENTION_ROWS finished verifications past both windows (destination back in place), then
    time the sweep that redacts and purges them (with their intents and attempt rows)."""
    first, last = round_ * RETENTION_ROWS + 1, (round_ + 1) * RETENTION_ROWS
    db.run(
        "UPDATE delivery_intents SET completed_at = now() - interval '100 days' WHERE id BETWEEN :a AND :b",
        a=first,
        b=last,
    )
    db.run(
        "UPDATE verifications SET created_at = now() - interval '100 days', expires_at = now() - interval '99 days',"
        " updated_at = now() - interval '99 days', verified_at = NULL, status = 'expired',"
        " destination = 'aged' || id || '@example.com', redacted_at = NULL"
        " WHERE id IN (SELECT verification_id FROM delivery_intents WHERE id BETWEEN :a AND :b)",
        a=first,
        b=last,
    )
    db.execute_script("VACUUM ANALYZE verifications, delivery_intents")
    ms, report = timed(lambda: reconcile(db, config, emit_signals=False))
    moves = report.moves
    # (a few more may be redacted: history crossing the 30-day line while the benchmark runs)
    assert moves["destinations_redacted"] >= RETENTION_ROWS and moves["verifications_purged"] == RETENTION_ROWS, moves
    return ms


# -- plans ------------------------------------------------------------------------------------------
def statements() -> dict[str, tuple[str, dict]]:
    outbox, operations, verifications = catalogue("outbox"), catalogue("operations"), catalogue("verifications")
    policy = _config().policy
    channels = list(policy.channels)
    return {
        "signals": (
            operations["signals"],
            {
                "deployment": "bench",
                "window_seconds": 300,
                "sms_max": None,
                "voice_max": None,
                "channels": list(DELIVERY_CHANNELS),
            },
        ),
        "suppress_dead": (outbox["suppress_dead"], {"limit": 500}),
        "resolve_ambiguous": (
            outbox["resolve_ambiguous"],
            {"limit": 500, "channels": channels, "policies": [policy.channel(c).ambiguity for c in channels]},
        ),
        "expire_claims": (outbox["expire_claims"], {"limit": 500}),
        "lose_leases": (
            outbox["lose_leases"],
            {"limit": 500, "channels": channels, "holds": [policy.ambiguous_delay(c) for c in channels]},
        ),
        "overdue": (operations["overdue"], {"horizon_seconds": 120}),
        "reap_idempotency_keys": (verifications["reap_idempotency_keys"], {"limit": 500}),
        "redact": (operations["redact"], {"limit": 500, "redact_after_seconds": 30 * 86400}),
        "purge": (operations["purge"], {"limit": 500, "purge_after_seconds": 90 * 86400}),
        # verifyctl inspect's attempt log of one intent (a history intent half-way through the ids)
        "inspect_attempts": (operations["timeline_attempts"], {"intent_id": 5000}),
    }


class _Rollback(Exception):
    pass


def plans(db: Database) -> dict[str, dict]:
    """EXPLAIN ANALYZE each statement with the live set present (rolled back): the indexes it
    used, and any sequential scan of a history table."""
    out = {}
    live = seed_live(db)
    for name, (sql, params) in statements().items():
        try:
            with db.transaction():
                db.execute_script("SET LOCAL signup_verification.retention_purge = 'on'")
                [[plan]] = db.run("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, **params)
                raise _Rollback
        except _Rollback:
            pass
        except Exception as exc:  # keep going: one failing statement must not hide the others
            out[name] = {"error": str(exc)}
            continue
        top = plan[0] if isinstance(plan, list) else plan
        nodes = list(_nodes(top["Plan"]))
        out[name] = {
            "indexes": sorted({n["Index Name"] for n in nodes if "Index Name" in n}),
            "seq_scans": sorted(
                {
                    n["Relation Name"]
                    for n in nodes
                    if n["Node Type"] == "Seq Scan" and n.get("Relation Name") in HISTORY_TABLES
                }
            ),
            "ms": round(top["Execution Time"], 2),
        }
    remove_live(db, live)
    return out


def _nodes(node: dict):
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


# -- report -----------------------------------------------------------------------------------------
def report(small: Figures, large: Figures, plan: dict[str, dict], machine_line: str, repeat: int) -> str:
    def ratio(a: float, b: float) -> str:
        return f"{b / a:.2f}x" if a else "-"

    lines = [
        "## History does not slow the hot path (claim, create) or the operator paths (signals, reconcile sweep)",
        "",
        f"`bench/history_bench.py`, {datetime.now(UTC):%Y-%m-%d}, {machine_line}. "
        f"Median of {repeat} repeats; both sizes in one run on one server. Each repeat seeds the same live set "
        f"({', '.join(f'{v} {k.replace(chr(95), chr(32))}' for k, v in LIVE.items())}) on top of the history, then times "
        "the signals query, one reconcile sweep that moves the live set, one quiet sweep (nothing to move), the dispatcher's "
        f"claim of {CLAIM_BATCH} eligible intents (released again) and {CREATES} creates (`create_verification`, "
        "one SQL function call each; median per call).",
        "",
        f"| finished intents in history (+2 attempt rows each) | claim {CLAIM_BATCH} | create | signals "
        f"| sweep (moves {large.moved} rows) | quiet sweep | retention sweep (redact + purge {RETENTION_ROWS:,}) | seed time |",
        "|---|---|---|---|---|---|---|---|",
        *[
            f"| {f.history:,} | {f.claim_ms:.2f} ms | {f.create_ms:.2f} ms | {f.signals_ms:.2f} ms | {f.sweep_ms:.1f} ms "
            f"| {f.quiet_ms:.1f} ms | {f.retention_ms:.0f} ms | {f.seed_seconds:.0f} s |"
            for f in (small, large)
        ],
        f"| **ratio** (target ≤ 1.5x) | **{ratio(small.claim_ms, large.claim_ms)}** | "
        f"**{ratio(small.create_ms, large.create_ms)}** | **{ratio(small.signals_ms, large.signals_ms)}** | "
        f"**{ratio(small.sweep_ms, large.sweep_ms)}** | **{ratio(small.quiet_ms, large.quiet_ms)}** | "
        f"**{ratio(small.retention_ms, large.retention_ms)}** | |",
        "",
        f"EXPLAIN ANALYZE at {large.history:,} (each statement once, rolled back; sequential scans of "
        "verifications / delivery_intents / delivery_attempts would be listed):",
        "",
        "| statement | indexes used | seq scans of history | time |",
        "|---|---|---|---|",
    ]
    for name, p in plan.items():
        if "error" in p:
            lines.append(f"| {name} | error: {p['error'][:80]} | | |")
        else:
            lines.append(
                f"| {name} | {', '.join(p['indexes']) or '-'} | {', '.join(p['seq_scans']) or 'none'} | {p['ms']} ms |"
            )
    lines += [
        "",
        "What keeps them flat: the signals query reads `eligible_delivery_intents` (the claim's own view) through "
        "the eligible partial indexes, in-flight and ambiguous intents through theirs, and attempts through the "
        "BRIN index on `observed_at` (the log is append-only, so the window is the last few block ranges); "
        "the attempt log's only other index is its unique (intent_id, attempt_number, outcome), which serves "
        "inspect, redact and purge by intent; the sweep's statements each read one partial index "
        "(`suppress_dead` unions one branch per index instead of `status IN (...)`, which no partial index "
        "matches); redaction reads `verifications_unredacted` and the purge reads `delivery_intents_completed`, "
        "with `verifications_superseded_by` so each deleted verification's foreign-key check is an index probe "
        "instead of a scan. A quiet sweep is ~19 round trips whatever the history. Load average "
        f"(1 min) at the end of the run: {os.getloadavg()[0]:.1f}.",
    ]
    return "\n".join(lines) + "\n"


def write_docs(section: str) -> None:
    block = f"{START}\n{section}{END}\n"
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n\n"
    if START in text and END in text:
        before, rest = text.split(START, 1)
        after = rest.split(END, 1)[1].lstrip("\n")
        text = before + block + ("\n" + after if after else "")
    else:
        text = text.rstrip("\n") + "\n\n" + block
    DOC.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = common.arguments(__doc__)
    parser.add_argument("--sizes", default="10000,1000000")
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args(argv)
    sizes = [1000, 5000] if args.quick else [int(s) for s in args.sizes.split(",")]
    repeat = 2 if args.quick else args.repeat
    params = server()
    figures, plan, machine_line = [], {}, ""
    for size in sizes:
        log(f"history {size:,}: seeding")
        db = fresh_database(params, f"bench_history_{size}")
        seed = seed_history(db, size)
        log(f"history {size:,}: measuring")
        figures.append(measure(db, size, repeat, seed))
        if size == sizes[-1]:
            plan = plans(db)
            machine_line = common.machine(params)
        db.close()
    section = report(figures[0], figures[-1], plan, machine_line, repeat)
    print(section)
    print(json.dumps({"figures": [f.__dict__ for f in figures], "plans": plan}, indent=1), file=sys.stderr)
    if args.write_docs:
        write_docs(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
