#!/usr/bin/env python3
"""Delivery-report ingest: one 1,000-event SendGrid batch, signed as SendGrid signs it.

Per round, on a freshly seeded database: N email intents accepted with provider references, then
  domain   delivery.reports.sendgrid_events + ingest (parse, one statement): events/s, round trips
  http     the delivery_reports target through functions-framework in process: ECDSA P-256
           verification of the raw body, parse, ingest, JSON answer: events/s
  replay   the same batch again (SendGrid retried it): every event a duplicate, nothing changes
Medians over the rounds; the load average is printed beside them (the machine is shared).

    .venv/bin/python bench/reports_bench.py [--events 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))
sys.path.insert(0, str(ROOT / "tests"))

from common import fresh_database, log, server  # noqa: E402
from signup_verification.delivery import reports  # noqa: E402
from signup_verification.outbox import transitions as t  # noqa: E402
from signup_verification.outbox.transitions import Settlement  # noqa: E402
from support.factories import CountingDatabase  # noqa: E402
from support.fakes.seed import seed_intents  # noqa: E402
from support.paths import TEST_TOKEN_KEYS  # noqa: E402
from support.reports import reports_env, sendgrid_event, sendgrid_headers  # noqa: E402


def accepted_batch(db, n: int) -> bytes:
    seed_intents(db, n, sms_every=0)
    claimed = t.claim(db, "bench", n, 60)
    begun = {b.intent_id: b.attempt_id for b in t.begin_attempts(db, "bench", [c.fence for c in claimed])}
    t.settle(db, "bench", [Settlement(c.id, c.lease_version, "accepted", provider_ref=f"msg-{c.id}") for c in claimed])
    return json.dumps([sendgrid_event(i, a) for i, a in begun.items()]).encode()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    params = server()
    domain, http, replay, trips = [], [], [], []
    for r in range(args.rounds):
        db = fresh_database(params, f"bench_reports_{r}")
        body = accepted_batch(db, args.events)
        counting = CountingDatabase(db)
        start = time.perf_counter()
        observations, ignored = reports.sendgrid_events(body)
        result = reports.ingest(counting, "sendgrid", observations, None, ignored)
        domain.append(args.events / (time.perf_counter() - start))
        trips.append(counting.statements)
        assert result.stored == result.delivered == args.events, result
        start = time.perf_counter()
        again = reports.ingest(db, "sendgrid", reports.sendgrid_events(body)[0], None)
        replay.append(args.events / (time.perf_counter() - start))
        assert again.duplicates == args.events and again.stored == 0, again
        http.append(http_round(params, body, args.events, r))
        db.close()
    log(f"load average: {open('/proc/loadavg').read().split()[:3]}")
    print(json.dumps({
        "events": args.events, "rounds": args.rounds,
        "domain_events_per_second": round(statistics.median(domain)),
        "round_trips_per_batch": max(trips),
        "replay_events_per_second": round(statistics.median(replay)),
        "http_events_per_second": round(statistics.median(http)),
        "loadavg": open("/proc/loadavg").read().split()[:3],
    }))  # fmt: skip
    return 0


def http_round(params, body: bytes, n: int, r: int) -> float:
    """The whole target in process: a fresh database with the same batch, signature checked."""
    import functions_framework

    from signup_verification import runtime

    db = fresh_database(params, f"bench_reports_http_{r}")
    body = accepted_batch(db, n)
    os.environ.update(reports_env(), DATABASE_URL=params.with_database(f"bench_reports_http_{r}").url(),
                      TOKEN_KEYS=TEST_TOKEN_KEYS, FUNCTION_TARGET="delivery_reports")  # fmt: skip
    runtime.reset()
    client = functions_framework.create_app("delivery_reports", str(ROOT / "functions" / "main.py")).test_client()
    start = time.perf_counter()
    answer = client.post("/sendgrid", data=body, headers=sendgrid_headers(body))
    elapsed = time.perf_counter() - start
    assert answer.status_code == 200 and answer.get_json()["stored"] == n, answer.get_data(as_text=True)
    runtime.reset()
    db.close()
    return n / elapsed


if __name__ == "__main__":
    sys.exit(main())
