#!/usr/bin/env python3
"""The raw-SQL limit: the dispatcher's own claim (fused with begin), start and settle statements (the same
.sql files, prepared, one connection) driven in a tight loop with no rendering, sending or
bookkeeping between them. What the database can do per intent on this machine; the dispatcher's
rate divided by this is the share Python and the pipeline cost.

    .venv/bin/python bench/raw_sql_bench.py [--quick]     # fused claim vs the two-step begin, interleaved
"""

from __future__ import annotations

import argparse
import time

from common import fresh_database, log, server
from signup_verification.outbox import transitions
from signup_verification.platform.catalogue import catalogue
from signup_verification.platform.channels import DELIVERY_CHANNELS
from signup_verification.platform.database import Database
from support.fakes.seed import seed_intents

OUTBOX = catalogue("outbox")
OWNER = "raw-sql"


def seed(db: Database, n: int) -> None:
    for first in range(0, n, 50_000):
        seed_intents(db, min(50_000, n - first), sms_every=5, prefix=f"r{first}", offset=first)
    db.execute_script("VACUUM ANALYZE")


def drain(db: Database, batch: int, fused: bool = True) -> int:
    """claim (fused: begins the attempts) -> start -> settle(accepted) until nothing is eligible, as the
    dispatcher does; returns intents settled. `fused=False`: the two-step shape the dispatcher uses
    for claimed intents it begins later (claim -> begin_attempts, a second non-HOT UPDATE and the
    attempt row there)."""
    claim = OUTBOX["claim"]
    start = OUTBOX["start" if fused else "begin_attempts"]
    db.run("SELECT set_config('plan_cache_mode', 'force_custom_plan', false)")
    done = 0
    while True:
        rows = db.rows(  # no SMS or call budget; every channel up to the batch
            claim,
            owner=OWNER,
            limit=batch,
            **{f"{channel}_limit": batch for channel in DELIVERY_CHANNELS},
            lease_seconds=60,
            sms_max=None,
            voice_max=None,
            begin=fused,
            dead_within=0.0,
        )
        if not rows:
            return done
        ids, versions = [r["id"] for r in rows], [r["lease_version"] for r in rows]
        db.run(start, owner=OWNER, ids=ids, versions=versions)
        accepted = transitions.AttemptOutcome.ACCEPTED
        settlements = [transitions.Settlement(r["id"], r["lease_version"], accepted, provider_ref="raw") for r in rows]
        applied = transitions.settle(db, OWNER, settlements)  # the same statement, its parameters built alike
        done += len(applied)


def measure(params, intents: int, batch: int, fused: bool = True) -> float:
    """intents/s for one drain of a freshly seeded database."""
    db = fresh_database(params, "bench_raw_sql")
    try:
        seed(db, intents)
        db.execute_script("CHECKPOINT")  # full-page images after it hit both shapes alike
        [[lsn]] = db.run("SELECT pg_current_wal_lsn()::text")
        started = time.perf_counter()
        done = drain(db, batch, fused)
        seconds = time.perf_counter() - started
        assert done == intents, (done, intents)
        # load-independent figures: WAL written and how many intent updates were HOT
        [[wal]] = db.run("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), CAST(:lsn AS pg_lsn))::float8", lsn=lsn)
        time.sleep(0.6)  # table statistics reach the view after the backend's next flush
        [[upd, hot]] = db.run(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'delivery_intents'"
        )
        log(
            f"  {'fused' if fused else 'two-step'}: WAL {wal / done:,.0f} B/intent, intent updates {upd / done:.2f}"
            f"/intent of which HOT {hot / done:.2f}"
        )
        return done / seconds
    finally:
        db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args()
    params = server()
    n = 2_000 if args.quick else 20_000
    for fused in (True, False, True, False):  # interleaved: load drifts over both alike
        rate = measure(params, n, args.batch, fused)
        log(f"raw SQL, batch {args.batch}, {'fused claim' if fused else 'two-step begin'}: {rate:,.0f} intents/s")


if __name__ == "__main__":
    main()
