#!/usr/bin/env python3
"""Memory: peak RSS of one dispatch invocation handling 5,000 intents (target < 150 MB), and what
each send in flight costs.

The intents are seeded by this process; the invocation runs in a fresh interpreter (so its peak
RSS, ru_maxrss, is the invocation's own: imports, the connection, rendering, the batches), with the
zero-latency sender serializing every email to MIME as the SMTP adapter does. Several runs, median.
Per send in flight: the same invocation through the real SendGrid adapter (urllib3, one pooled
connection per sender) to a fake answering after 200 ms (in this process), at 8, 64 and 128 sends
in flight (SEND_CONCURRENCY_MAX_EMAIL); the slope of peak RSS over in-flight sends.

    .venv/bin/python bench/memory_bench.py [--quick] [--write-docs]
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from datetime import UTC, datetime

import common
from common import UNPACED, fresh_database, log, machine, median, server

SECTION = "memory-bench"
TARGET_MB = 150


def child(url: str, intents: int, batch: int, sendgrid: str = "", inflight: int = 0) -> None:
    """Runs in the fresh interpreter: one invocation, then its peak RSS as JSON on stdout. With
    `sendgrid` (the fake's URL): through the SendGrid adapter, `inflight` sends at once."""
    import dispatch_bench
    from provider_http import API_KEY
    from signup_verification.delivery.batch_sizing import LatencyEstimator
    from signup_verification.delivery.channels import build_channels
    from signup_verification.operations.dispatcher import Dispatcher, DispatchRun
    from signup_verification.platform.database import Database
    from support.config import make_config

    imported_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    db = Database.from_url(url, statement_timeout_ms=600_000)
    http = (
        {"email_transport": "sendgrid", "sendgrid_api_key": API_KEY, "sendgrid_api_url": sendgrid} if sendgrid else {}
    )
    settings = make_config(
        deployment="bench",
        token_keys=dispatch_bench.TEST_TOKEN_KEYS,
        dispatch_max_batch=batch,
        function_timeout_seconds=3600,
        email_from="Signup <no-reply@example.org>",
        send_concurrency_max_email=inflight or None,
        **UNPACED,
        **http,
    )
    channels = (
        build_channels(settings.channels)
        if sendgrid
        else {
            "email": dispatch_bench.BenchSender("email", 0.0, mime=True),
            "sms": dispatch_bench.BenchSender("sms", 0.0),
        }
    )
    estimator = LatencyEstimator()
    estimator.seed({"email": 0.2 if sendgrid else 0.0, "sms": 0.0})
    report = Dispatcher(DispatchRun(db, settings.dispatch, dispatch_bench.KEYRING, channels), estimator=estimator).run()
    assert report.accepted == intents, report
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"imported_mb": imported_kb / 1024, "peak_mb": peak_kb / 1024}))


def measure(params, intents: int, batch: int, sendgrid: str = "", inflight: int = 0) -> dict:
    from support.fakes.seed import seed_intents

    db = fresh_database(params, "bench_memory")
    seed_intents(db, intents, sms_every=0 if sendgrid else 5, prefix="m")
    db.execute_script("VACUUM ANALYZE")
    db.close()
    url = params.with_database("bench_memory").url()
    out = subprocess.run(
        [sys.executable, __file__, "--child", url, str(intents), str(batch), sendgrid, str(inflight)],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def per_send(params, quick: bool, runs: int) -> list[tuple[int, float]]:
    """(sends in flight, median peak RSS) through the SendGrid adapter to a 200 ms fake."""
    from provider_http import TimedSendGrid

    found = []
    with TimedSendGrid(0.2) as fake:
        for inflight in (8, 64) if quick else (8, 64, 128):
            intents = inflight * 4  # four rounds of sends: every sender busy, every connection opened
            peaks = [measure(params, intents, 500, fake.send_url, inflight)["peak_mb"] for _ in range(runs)]
            found.append((inflight, median(peaks)))
            log(f"{inflight} sends in flight: peak {found[-1][1]:.1f} MB")
    return found


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6]))
        return 0
    parser = common.arguments(__doc__)
    args = parser.parse_args(argv)
    intents, runs = (500, 1) if args.quick else (5_000, 3)
    params = server()
    rows = []
    for batch in (500, 2000):
        results = [measure(params, intents, batch) for _ in range(runs)]
        rows.append((batch, median(r["imported_mb"] for r in results), median(r["peak_mb"] for r in results)))
        log(f"batch {batch}: after imports {rows[-1][1]:.0f} MB, peak {rows[-1][2]:.0f} MB")
    lines = [
        "## Memory of one dispatch invocation",
        "",
        f"`bench/memory_bench.py`, {datetime.now(UTC):%Y-%m-%d}, {machine(params)}. One invocation "
        f"in a fresh interpreter drains {intents:,} intents (1 in 5 SMS; every email serialized to MIME); peak "
        f"RSS is `ru_maxrss`; median of {runs} runs.",
        "",
        "| max batch | RSS after imports | peak RSS | target |",
        "|---|---|---|---|",
    ]
    for batch, imported, peak in rows:
        lines.append(
            f"| {batch} | {imported:.0f} MB | **{peak:.0f} MB** | < {TARGET_MB} MB "
            f"({'ok' if peak < TARGET_MB else 'MISSED'}) |"
        )
    inflight = per_send(params, args.quick, runs)
    (low, low_mb), (high, high_mb) = inflight[0], inflight[-1]
    lines += [
        "",
        "Per send in flight: one invocation through the SendGrid adapter (urllib3, a pooled keep-alive connection per "
        "sender thread) to a fake answering after 200 ms, four rounds of sends at each level.",
        "",
        "| sends in flight (SEND_CONCURRENCY_MAX_EMAIL) | peak RSS |",
        "|---|---|",
        *(f"| {n} | {mb:.1f} MB |" for n, mb in inflight),
        "",
        f"**{(high_mb - low_mb) / (high - low) * 1024:.0f} KB per send in flight** (slope from {low} to {high}): "
        "a sender thread's touched stack, its connection and buffers, the rendered message.",
    ]
    section = "\n".join(lines) + "\n"
    common.publish(SECTION, section, args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
