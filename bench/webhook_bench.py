#!/usr/bin/env python3
"""The webhook channel's delivery rate side by side with the email channel, in one run.

Each round runs, on a freshly seeded database each, one dispatch invocation (8 send threads, batches
up to 500) over N intents of one kind:
  email, in-process zero-latency adapter       the throughput bench's baseline (render, no network)
  webhook, in-process zero-latency adapter     the same outbox path for events: claim, begin, the body
                                               rendered and signed (as WebhookChannel does), settle
  webhook, real HTTP to a zero-latency receiver WebhookChannel itself: signed POSTs over keep-alive
                                               loopback connections to a receiver in its own process
                                               that answers 204 at once
Figures are medians over the rounds; the load average is recorded beside them (the machine is shared).

    .venv/bin/python bench/webhook_bench.py [--quick] [--rounds N] [--intents N] [--write-docs]
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))
sys.path.insert(0, str(ROOT / "tests"))

import common  # noqa: E402
from common import load, log, machine, median, server  # noqa: E402
from dispatch_bench import KEYRING, BenchSender, CountingDatabase  # noqa: E402
from signup_verification.delivery.batch_sizing import LatencyEstimator  # noqa: E402
from signup_verification.delivery.channels.base import SendResult  # noqa: E402
from signup_verification.delivery.channels.http import HttpClient  # noqa: E402
from signup_verification.delivery.channels.webhook import WebhookChannel  # noqa: E402
from signup_verification.delivery.webhook_config import parse_secrets  # noqa: E402
from signup_verification.operations.dispatcher import Dispatcher, DispatchRun  # noqa: E402
from support.config import make_config  # noqa: E402
from support.fakes.seed import seed_intents  # noqa: E402
from support.paths import TEST_TOKEN_KEYS  # noqa: E402

SECTION = "webhook-bench"
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # a bench key (base64 of 24 bytes), never deployed
# The seeded verifications' events, as record_event() writes them (record_event).
EVENTS_SQL = """
WITH gone AS (DELETE FROM delivery_intents RETURNING verification_id)
INSERT INTO delivery_intents (verification_id, channel, role, event_type, payload, purpose, locale, template_version)
SELECT v.id, 'webhook', 'event', 'verification.verified', event_data(v), v.purpose, v.locale, 'event/v1'
  FROM verifications AS v WHERE v.id IN (SELECT verification_id FROM gone)
"""


class SigningSender:
    """In-process zero-latency webhook adapter: renders and signs exactly as WebhookChannel does."""

    channel, transport = "webhook", "bench"

    def __init__(self):
        self._headers = WebhookChannel("http://127.0.0.1:9/", parse_secrets(SECRET), client=None).headers  # type: ignore[arg-type]

    def send(self, message, deadline: float) -> SendResult:
        self._headers(message, message.body())
        return SendResult.accepted()

    def close(self) -> None:
        pass


class _Answer204(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def _receiver(port_out) -> None:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Answer204)
    httpd.daemon_threads = True
    port_out.send(httpd.server_address[1])
    httpd.serve_forever()


@dataclass(frozen=True)
class Row:
    name: str
    kind: str  # email | webhook-inproc | webhook-http


ROWS = (
    Row("email, in-process zero-latency adapter", "email"),
    Row("webhook, in-process zero-latency adapter (rendered + signed)", "webhook-inproc"),
    Row("webhook, real HTTP to a zero-latency loopback receiver", "webhook-http"),
)


def run_one(params, row: Row, n: int, receiver_url: str) -> float:
    db = common.fresh_database(params, "webhook_bench", CountingDatabase)
    seed_intents(db, n, prefix="wb")
    if row.kind != "email":
        db.run(EVENTS_SQL)
    db.execute_script("ANALYZE")
    settings = make_config(
        deployment="bench",
        token_keys=TEST_TOKEN_KEYS,
        send_concurrency=8,
        dispatch_max_batch=500,
        function_timeout_seconds=3600,
        email_from="Signup <no-reply@example.org>",
        **common.UNPACED,
    )
    if row.kind == "email":
        channels = {"email": BenchSender("email", 0.0)}
    elif row.kind == "webhook-inproc":
        channels = {"webhook": SigningSender()}
    else:
        channels = {"webhook": WebhookChannel(receiver_url, parse_secrets(SECRET), HttpClient(timeout=10, pool_size=8))}
    estimator = LatencyEstimator()
    estimator.seed({"email": 0.0, "webhook": 0.001})  # a warm instance
    started = time.perf_counter()
    report = Dispatcher(DispatchRun(db, settings.dispatch, KEYRING, channels), estimator=estimator).run()
    seconds = time.perf_counter() - started
    for channel in channels.values():
        channel.close()
    db.close()
    assert report.accepted == n, report
    return n / seconds


def main(argv: list[str] | None = None) -> int:
    parser = common.arguments(__doc__)
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--intents", type=int)
    args = parser.parse_args(argv)
    n = args.intents or (1000 if args.quick else 10_000)
    rounds = args.rounds or (1 if args.quick else 3)
    params = server()
    ctx = multiprocessing.get_context("fork")
    mine, theirs = ctx.Pipe()
    receiver = ctx.Process(target=_receiver, args=(theirs,), daemon=True)
    receiver.start()
    url = f"http://127.0.0.1:{mine.recv()}/hooks/verification"
    rates: dict[str, list[float]] = {r.name: [] for r in ROWS}
    loads: list[float] = []
    try:
        for round_number in range(rounds):
            for row in ROWS:
                rate = run_one(params, row, n, url)
                rates[row.name].append(rate)
                loads.append(os.getloadavg()[0])
                log(f"round {round_number + 1}: {row.name}: {rate:,.0f} intents/s (load {load()})")
    finally:
        receiver.terminate()
        receiver.join(5)
    section = report(rates, n, rounds, machine(params), loads)
    common.publish(SECTION, section, args.write_docs)
    return 0


def report(rates: dict[str, list[float]], n: int, rounds: int, machine_line: str, loads: list[float]) -> str:
    email = median(rates[ROWS[0].name])
    lines = [
        "## Webhook channel: delivery rate beside email",
        "",
        f"`bench/webhook_bench.py`, {datetime.now(UTC):%Y-%m-%d}, {machine_line}. One dispatch invocation "
        f"(8 send threads, batches up to 500) over {n:,} intents of one kind per row, median of {rounds} "
        "round(s), each row on a fresh database; the rows of a round run one after the other. Load average "
        f"(1 min) during the run: {min(loads):.1f} to {max(loads):.1f} (a shared machine: other sessions' work "
        "is in these figures; rerun on a quiet machine for final ones).",
        "",
        "| row | intents/s | vs email |",
        "|---|---|---|",
    ]
    for row in ROWS:
        rate = median(rates[row.name])
        lines.append(f"| {row.name} | **{rate:,.0f}** | {rate / email:.2f} |")
    lines += [
        "",
        "The in-process webhook row is the outbox's own cost for events (the same claim, begin and settle "
        "statements as email; the body is built from the stored payload and HMAC-signed per secret instead "
        "of a template rendered). The HTTP row adds what a real receiver costs the worker: one signed POST "
        "per event over a pooled keep-alive connection (urllib3), 8 in flight; the receiver is Python's "
        "threading HTTP server in its own process, so on 2 cores it competes with the dispatcher and "
        "PostgreSQL for CPU: the figure is a floor for a faster receiver, not a ceiling.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
