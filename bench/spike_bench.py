#!/usr/bin/env python3
"""A launch-day spike through the local emulation: 10,000 signups arriving at 200/s, email through
SendGrid's protocol to a fake answering after 200 ms, the dispatch target fanning out; beside it, in
the same run, a plain 64-thread client against the same fake.

The deployment as `verifyctl dev` runs it, with the production dispatch settings: the create and
dispatch targets under functions-framework's server (functions/main.py), the Cloud Scheduler
emulation (local/scheduler.py: the two dispatch jobs, every 60 s, fired once at the start) POSTing
to dispatch, DISPATCH_IDLE_WAIT on, a 75 s timeout, and the fan-out's local stand-in
(platform/tasks.py) starting more invocations of the same dispatch target. Signups are POSTed to
create over HTTP by a client pacing them at the arrival rate. Reported: accepted per second (the
fake's count over the run), p50/p95 from create to accepted (database clock: the accepted attempt
row minus the verification's created_at), the peak eligible backlog, links that expired unsent,
duplicates (messages the fake took twice), the fan-out's invocations. A second row runs the same
spike with 16 sends in flight per invocation (~64/s each, a third of the arrivals): there one
invocation is not enough, and the fan-out has to carry it.

    .venv/bin/python bench/spike_bench.py [--quick] [--write-docs]
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import common
from common import fresh_database, log, machine, quiet_round, server
from create_bench import free_port
from provider_http import TimedSendGrid, plain_client, serve, service_env, stop
from signup_verification.local.scheduler import Job, Scheduler

SECTION = "spike-bench"
LATENCY = 0.2
CREATE_THREADS = 24
SQL = {
    "latency": """
        SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY s) AS p50, percentile_cont(0.95) WITHIN GROUP (ORDER BY s) AS p95,
               max(s) AS worst
          FROM (SELECT extract(epoch FROM a.observed_at - v.created_at) AS s
                  FROM verifications AS v
                  JOIN delivery_intents AS i ON i.verification_id = v.id
                  JOIN delivery_attempts AS a ON a.intent_id = i.id AND a.outcome = 'accepted') AS t""",
    "sample": """
        SELECT (SELECT count(*) FROM eligible_delivery_intents)::integer AS eligible,
               (SELECT count(*) FROM delivery_intents WHERE status IN ('claimed', 'attempting'))::integer AS in_flight,
               (SELECT count(*) FROM delivery_intents WHERE status = 'accepted')::integer AS accepted,
               (SELECT count(*) FROM dispatch_invocations WHERE until > now())::integer AS fanout""",
    "expired": """
        SELECT count(*)::integer AS n FROM delivery_intents AS i JOIN verifications AS v ON v.id = i.verification_id
         WHERE i.status <> 'accepted' AND (i.suppression_reason = 'expired' OR v.expires_at <= now())""",
    "span": """
        SELECT extract(epoch FROM (SELECT max(observed_at) FROM delivery_attempts WHERE outcome = 'accepted')
                                  - (SELECT min(created_at) FROM verifications))::float8 AS seconds,
               (SELECT count(DISTINCT lease_owner) FROM delivery_attempts)::integer AS invocations""",
}


@dataclass
class Spike:
    name: str
    signups: int
    rate: float
    created: int = 0
    create_seconds: float = 0.0
    accepted: int = 0
    accepted_per_second: float = 0.0
    p50: float = 0.0
    p95: float = 0.0
    worst: float = 0.0
    peak_backlog: int = 0
    peak_in_flight: int = 0
    peak_fanout: int = 0
    invocations: int = 0
    expired_unsent: int = 0
    duplicates: int = 0
    client_rate: float = 0.0
    load: str = ""


def post_signups(port: int, spike: Spike) -> None:
    """`signups` creates over HTTP, the i-th due at i / rate seconds, from CREATE_THREADS connections."""
    counter = iter(range(spike.signups))
    lock = threading.Lock()
    started = time.monotonic()
    failures: list[str] = []

    def worker() -> None:
        con = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                break
            wait = started + i / spike.rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            body = json.dumps({"account_id": f"spike-{i}", "channel": "email", "destination": f"spike{i}@example.com"})
            con.request(
                "POST", "/", body=body, headers={"Content-Type": "application/json", "Idempotency-Key": f"s{i}"}
            )
            answer = con.getresponse()
            answer.read()
            if answer.status != 201:
                failures.append(str(answer.status))
        con.close()

    threads = [threading.Thread(target=worker) for _ in range(CREATE_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spike.create_seconds = time.monotonic() - started
    spike.created = spike.signups - len(failures)
    assert not failures, failures[:5]


def run(params, name: str, signups: int, rate: float, client_count: int, **settings: str) -> Spike:
    spike = Spike(name, signups, rate, load=quiet_round()[0])  # waits for a quiet machine (BENCH_QUIET_WAIT)
    db = fresh_database(params, "spike_bench")
    fake = TimedSendGrid(LATENCY).start()
    create_port, dispatch_port = free_port(), free_port()
    dispatch_url = f"http://127.0.0.1:{dispatch_port}/"
    env = service_env(
        params.with_database("spike_bench").url(),
        fake,
        DISPATCH_IDLE_WAIT="true",
        FUNCTION_TIMEOUT_SECONDS="75",
        DISPATCH_SAFETY_MARGIN_SECONDS="2",
        DISPATCH_FANOUT_URL=dispatch_url,
        THREADS="8",
        **settings,
    )
    create = serve("create_verification", create_port, env)
    dispatch = serve("dispatch", dispatch_port, env)
    jobs = [Job("dispatch", dispatch_url, 60.0), Job("dispatch_relay", dispatch_url, 60.0)]
    scheduler = Scheduler(jobs, report=lambda line: None, timeout_seconds=120.0)
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.wait(0.5):
            row = db.rows(SQL["sample"])[0]
            spike.peak_backlog = max(spike.peak_backlog, row["eligible"])
            spike.peak_in_flight = max(spike.peak_in_flight, row["in_flight"])
            spike.peak_fanout = max(spike.peak_fanout, row["fanout"])
            spike.accepted = row["accepted"]

    sampler = threading.Thread(target=sample, daemon=True)
    try:
        scheduler.start()
        scheduler.run_now()  # the first ticks now, then every 60 s
        sampler.start()
        post_signups(create_port, spike)
        deadline = time.monotonic() + 600
        while spike.accepted < spike.created and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(1.0)
    finally:
        sampling.set()
        sampler.join(5)
        stop(dispatch)
        scheduler.stop()
        stop(create)
    taken = fake.destinations()
    spike.duplicates = len(taken) - len(set(taken))
    spike.client_rate = plain_client(fake, client_count)
    fake.stop()
    latency = db.rows(SQL["latency"])[0]
    spike.p50, spike.p95, spike.worst = (float(latency[k] or 0) for k in ("p50", "p95", "worst"))
    span = db.rows(SQL["span"])[0]
    spike.accepted = db.rows("SELECT count(*)::integer AS n FROM delivery_intents WHERE status = 'accepted'")[0]["n"]
    spike.accepted_per_second = spike.accepted / span["seconds"]
    spike.invocations = span["invocations"]
    spike.expired_unsent = db.rows(SQL["expired"])[0]["n"] + (spike.created - spike.accepted)
    db.close()
    return spike


def report(spikes: list[Spike], machine_line: str) -> str:
    s = spikes[0]
    lines = [
        "## A signup spike through the local emulation, with fan-out",
        "",
        f"`bench/spike_bench.py`, {datetime.now(UTC):%Y-%m-%d}, {machine_line}. {s.signups:,} email signups POSTed to "
        f"the create target at {s.rate:,.0f}/s ({CREATE_THREADS} client connections); the Cloud Scheduler emulation's two "
        "dispatch jobs (fired at the start, then every 60 s) POST to the dispatch target (DISPATCH_IDLE_WAIT on, 75 s "
        "timeout, every other dispatch setting at its default), which fans out through the local stand-in to itself; "
        f"SendGrid's protocol to a fake answering every request after {LATENCY * 1000:.0f} ms. Both targets under "
        "functions-framework's server, all on the same 2 cores: the spike itself keeps both busy, so the load while "
        "measuring is its own (the table gives the load before each row). The plain client: 64 threads POSTing to the "
        "same fake after the spike, in the same run.",
        "",
        "| figure | " + " | ".join(x.name for x in spikes) + " |",
        "|---|" + "---|" * len(spikes),
    ]
    rows = [
        ("signups created / wall time of the arrivals",
         lambda x: f"{x.created:,} in {x.create_seconds:.1f} s ({x.created / x.create_seconds:,.0f}/s)"),
        ("accepted by the provider", lambda x: f"**{x.accepted:,}**"),
        ("accepted per second (first create to last accepted)", lambda x: f"**{x.accepted_per_second:,.0f}/s**"),
        ("create → accepted p50 / p95 / max", lambda x: f"**{x.p50:.2f} s / {x.p95:.2f} s** / {x.worst:.2f} s"),
        ("peak eligible backlog (sampled every 0.5 s)", lambda x: f"{x.peak_backlog:,}"),
        ("peak sends claimed or in flight", lambda x: f"{x.peak_in_flight:,}"),
        ("dispatch invocations that sent (fan-out live at most)", lambda x: f"{x.invocations} ({x.peak_fanout})"),
        ("links expired unsent (target 0)", lambda x: f"**{x.expired_unsent}**"),
        ("duplicates: messages the fake took twice (target 0)", lambda x: f"**{x.duplicates}**"),
        ("plain 64-thread client, same fake, same run", lambda x: f"{x.client_rate:,.0f}/s"),
        ("load average (1 min) at the start", lambda x: x.load),
    ]  # fmt: skip
    lines += [f"| {label} | " + " | ".join(cell(x) for x in spikes) + " |" for label, cell in rows]
    ok = all(x.expired_unsent == 0 and x.duplicates == 0 and x.accepted == x.created for x in spikes)
    lines += [
        "",
        f"{'Both targets met' if ok else 'MISSED'}: every signup accepted, none expired unsent, none sent twice.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = common.arguments(__doc__)
    args = parser.parse_args(argv)
    signups, rate, client = (600, 100.0, 600) if args.quick else (10_000, 200.0, 5_000)
    scenarios = [("the defaults", {})]
    if not args.quick:
        scenarios.append(("16 sends in flight per invocation", {"SEND_CONCURRENCY_MAX_EMAIL": "16"}))
    params = server()
    spikes = []
    for name, settings in scenarios:
        spike = run(params, name, signups, rate, client, **settings)
        log(
            f"spike ({name}): {spike.accepted:,} accepted at {spike.accepted_per_second:,.0f}/s, p50 {spike.p50:.2f} s, "
            f"p95 {spike.p95:.2f} s, peak backlog {spike.peak_backlog:,}, {spike.invocations} invocations, expired "
            f"unsent {spike.expired_unsent}, duplicates {spike.duplicates}; client {spike.client_rate:,.0f}/s"
        )
        spikes.append(spike)
    section = report(spikes, machine(params))
    common.publish(SECTION, section, args.write_docs)
    return 0 if all(s.expired_unsent == 0 and s.duplicates == 0 for s in spikes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
