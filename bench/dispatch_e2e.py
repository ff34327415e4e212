"""One dispatch invocation with the defaults, end to end, against a plain 64-thread client (the part
of bench/dispatch_bench.py that runs the deployed shape): N email verifications created through
the create function's domain call, then one POST to the dispatch target as Cloud Scheduler sends it
(functions-framework's server, functions/main.py, every dispatch setting at its default), sending
through SendGrid's v3 protocol to a fake that answers after 200 ms. The rate is emails the fake
took per second from the POST to the last one; the client's, from its first request to its last,
against the same fake in the same round. Rounds alternate the two."""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import time
from dataclasses import dataclass

from common import fresh_database, log, quiet_round
from create_bench import free_port, request
from provider_http import TimedSendGrid, plain_client, serve, service_env, stop
from signup_verification.api.create import create_verification
from signup_verification.api.models import CreateVerificationRequest
from signup_verification.config import load as load_config
from signup_verification.platform.database import ConnectionParams, Database
from signup_verification.verifications.tokens import Keyring
from support.paths import TEST_TOKEN_KEYS

KEYRING = Keyring.parse(TEST_TOKEN_KEYS)
LATENCY = 0.2
CLIENT_THREADS = 64


@dataclass(frozen=True)
class Round:
    load: str
    dispatch_rate: float
    client_rate: float
    accepted: int
    batches: int
    elapsed_ms: int

    @property
    def ratio(self) -> float:
        return self.dispatch_rate / self.client_rate


def create_emails(db: Database, env: dict[str, str], count: int, tag: str) -> None:
    settings = load_config(env).create
    settings = dataclasses.replace(
        settings,
        abuse=dataclasses.replace(settings.abuse, per_account_per_hour=10**7, per_client_per_hour=10**7),
    )
    for i in range(count):
        body = {"account_id": f"{tag}-{i}", "channel": "email", "destination": f"{tag}{i}@example.com"}
        result = create_verification(db, settings, KEYRING, CreateVerificationRequest.model_validate(body), f"{tag}{i}")
        assert result.status == 201, result.body


def one_round(params: ConnectionParams, count: int, number: int) -> Round:
    load, _ = quiet_round()
    db = fresh_database(params, "dispatch_e2e")
    fake = TimedSendGrid(LATENCY).start()
    port = free_port()
    env = service_env(params.with_database("dispatch_e2e").url(), fake)
    proc = serve("dispatch", port, env)
    try:
        create_emails(db, env, count, f"r{number}-")
        db.execute_script("ANALYZE")
        client_first = number % 2 == 0
        if client_first:
            client_rate = plain_client(fake, count, CLIENT_THREADS)
        started = time.monotonic()
        status, body = request(port, "POST", "/", b"{}", {"Content-Type": "application/json"})
        assert status == 200, body
        report = json.loads(body)
        dispatch_rate = fake.rate(started)
        if not client_first:
            client_rate = plain_client(fake, count, CLIENT_THREADS)
    finally:
        stop(proc)
        fake.stop()
        db.close()
    assert report["accepted"] == count, report
    return Round(load, dispatch_rate, client_rate, report["accepted"], report["batches"], report["elapsed_ms"])


def run(params: ConnectionParams, quick: bool) -> list[Round]:
    count, rounds = (200, 1) if quick else (1200, 3)
    found = []
    for number in range(rounds):
        r = one_round(params, count, number)
        log(
            f"e2e round {number + 1}: dispatch {r.dispatch_rate:,.0f}/s vs {CLIENT_THREADS}-thread client "
            f"{r.client_rate:,.0f}/s = {r.ratio:.2f}x ({r.batches} batches, load {r.load})"
        )
        found.append(r)
    return found


def report(rounds: list[Round]) -> list[str]:
    ratios = [r.ratio for r in rounds]
    lines = [
        "",
        f"### One invocation with the defaults vs a plain {CLIENT_THREADS}-thread client (SendGrid protocol, "
        f"{LATENCY * 1000:.0f} ms)",
        "",
        f"{rounds[0].accepted:,} email verifications created, then one POST to the dispatch target (functions-framework, "
        "functions/main.py, no dispatch setting changed); the fake SendGrid (tests/support/fakes/http.py) answers each "
        f"request after {LATENCY * 1000:.0f} ms. The client: {CLIENT_THREADS} threads POSTing the same kind of body to "
        "the same fake over pooled keep-alive connections (urllib3, as the adapter). Same round, alternating order.",
        "",
        "| round | load | dispatch invocation | batches | plain client | invocation ÷ client |",
        "|---|---|---|---|---|---|",
    ]
    for n, r in enumerate(rounds, 1):
        lines.append(
            f"| {n} | {r.load} | **{r.dispatch_rate:,.0f}/s** | {r.batches} | {r.client_rate:,.0f}/s | **{r.ratio:.2f}x** |"
        )
    verdict = "ok" if statistics.median(ratios) >= 0.8 else "MISSED"
    lines += ["", f"Median ratio **{statistics.median(ratios):.2f}x** (target ≥ 0.8x: {verdict})."]
    return lines


if __name__ == "__main__":
    os.environ.setdefault("BENCH_QUIET_WAIT", "0")
    import common

    for line in report(run(common.server(), quick=True)):
        print(line)
