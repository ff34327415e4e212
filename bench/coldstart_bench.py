#!/usr/bin/env python3
"""Cold start: process start -> first 201 of create_verification under functions-framework, against
a trivial function on the same framework (process start -> first answer) and a function with create's
third-party dependencies only (bench/floor_function.py, the floor), median of 5 each, alternating;
and what `import main` costs (`python -X importtime`), heaviest packages first.

    .venv/bin/python bench/coldstart_bench.py [--quick] [--write-docs]

The function runs as a deployed instance logs (LOG_FORMAT=json: google-cloud-logging's structured
handler, deferred until the first answer is out, platform/log_handoff.py) against the private
embedded server over its unix socket (a deployed instance dials Cloud SQL through the connector,
whose import is measured apart). The clock starts just before the process is spawned and stops when
the first request's answer has been read; the client retries the connection every 5 ms until the
server listens.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import common
from common import ROOT, fresh_database, log, machine, median, quiet_only, quiet_round, server
from create_bench import free_port
from support.paths import TEST_TOKEN_KEYS

sys.path.insert(0, str(ROOT / "tools"))
import build_bundle  # noqa: E402  (tools/build_bundle.py: the deployed layout)

SECTION = "coldstart-bench"
TRIVIAL = ROOT / "bench" / "trivial_function.py"
FLOOR = ROOT / "bench" / "floor_function.py"  # create's third-party dependencies only, no code of ours
PYTHON = str(ROOT / ".venv" / "bin" / "python")


def function_env(database_url: str, target: str, source: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": database_url,
        "TOKEN_KEYS": TEST_TOKEN_KEYS,
        "ENVIRONMENT": "local",
        "DEPLOYMENT": "bench",
        "LOG_FORMAT": "json",
        "LOG_LEVEL": "INFO",
        "RATE_LIMIT_PER_HOUR": "1000",
        "FUNCTION_TARGET": target,
        "PYTHONPATH": str(source),  # the bundle's package, not the checkout's
    }


def first_answer(env: dict[str, str], source: str, target: str, body: dict | None, tag: str) -> tuple[float, int]:
    """Seconds from spawning functions-framework to the first answer read, and its status."""
    port = free_port()
    cmd = [
        str(ROOT / ".venv" / "bin" / "functions-framework"),
        "--source",
        source,
        "--target",
        target,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    payload = json.dumps(body).encode() if body else b"{}"
    headers = {"Content-Type": "application/json", "Idempotency-Key": tag}
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        while time.perf_counter() - started < 60:
            con = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            try:
                con.request("POST", "/", body=payload, headers=headers)
                response = con.getresponse()
                response.read()
                return time.perf_counter() - started, response.status
            except (ConnectionRefusedError, ConnectionResetError, http.client.RemoteDisconnected):
                time.sleep(0.005)
            finally:
                con.close()
        raise RuntimeError("no answer in 60 s: " + proc.stderr.read().decode()[-2000:])
    finally:
        proc.terminate()
        proc.wait(30)


_IMPORT_LINE = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)")


def import_profile(env: dict[str, str], statement: str, cwd: Path) -> tuple[float, list[tuple[str, float]]]:
    """(total ms of `statement`, the top-level packages by cumulative ms) from python -X importtime."""
    out = subprocess.run(
        [PYTHON, "-X", "importtime", "-c", statement],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    packages: dict[str, float] = {}  # package -> the self time of all its modules
    for line in out.splitlines():
        m = _IMPORT_LINE.match(line)
        if m:
            parts = m.group(4).split(".")
            top = ".".join(parts[:3]) if parts[0] == "google" and len(parts) > 2 else parts[0]
            packages[top] = packages.get(top, 0.0) + int(m.group(1)) / 1000
    started = time.perf_counter()
    subprocess.run([PYTHON, "-c", statement], env=env, cwd=cwd, check=True, capture_output=True)
    wall = (time.perf_counter() - started) * 1000
    return wall, sorted(packages.items(), key=lambda kv: -kv[1])


def deployed_source(into: Path) -> Path:
    """The function source as deployed: tools/build_bundle.py's files (main.py and the package) written
    out as Cloud Build unpacks the zip, then compiled as the buildpack compiles the image's
    (`compileall -f`)."""
    for name, content in build_bundle.bundle_files().items():
        path = into / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    subprocess.run([PYTHON, "-m", "compileall", "-f", "-q", "."], cwd=into, check=True, capture_output=True)
    return into


def measure(params, rounds: int) -> dict:
    db = fresh_database(params, "bench_coldstart")
    url = params.with_database("bench_coldstart").url()
    db.close()
    source = deployed_source(Path(tempfile.mkdtemp(prefix="coldstart-")))
    create_env = function_env(url, "create_verification", source)
    trivial_env = function_env(url, "trivial", source)
    floor_env = function_env(url, "floor", source)
    ours, trivial, floor, loads, quiet = [], [], [], [], []
    for r in range(rounds):
        label, calm = quiet_round()
        loads.append(label)
        quiet.append(calm)
        body = {"account_id": f"cold-{r}", "channel": "email", "destination": f"cold-{r}@example.com"}
        seconds, status = first_answer(create_env, str(source / "main.py"), "create_verification", body, f"cold-{r}")
        assert status == 201, status
        ours.append(seconds)
        seconds, status = first_answer(trivial_env, str(TRIVIAL), "trivial", None, f"t-{r}")
        assert status == 201, status
        trivial.append(seconds)
        seconds, status = first_answer(floor_env, str(FLOOR), "floor", body, f"f-{r}")
        assert status == 201, status
        floor.append(seconds)
        log(
            f"round {r + 1}: create {ours[-1]:.3f} s, trivial {trivial[-1]:.3f} s, "
            f"dependencies only {floor[-1]:.3f} s (load {loads[-1]})"
        )
    main_ms, packages = import_profile(create_env, "import os, main; os._exit(0)", source)  # no atexit work
    logging_ms, _ = import_profile(create_env, "import google.cloud.logging_v2.handlers", source)
    connector_ms, _ = import_profile(create_env, "import google.cloud.sql.connector", source)
    bare_ms, _ = import_profile(create_env, "pass", source)
    return {
        "bytecode": "the image's layout (tools/build_bundle.py's files, compiled by the buildpack's compileall -f)",
        "ours": ours,
        "trivial": trivial,
        "floor": floor,
        "loads": loads,
        "quiet": quiet,
        "main_ms": main_ms,
        "packages": packages,
        "logging_ms": logging_ms - bare_ms,
        "connector_ms": connector_ms - bare_ms,
        "bare_ms": bare_ms,
    }


def report(m: dict, machine_line: str) -> str:
    ours, trivial = median(quiet_only(m["ours"], m["quiet"])), median(quiet_only(m["trivial"], m["quiet"]))
    floor = median(quiet_only(m["floor"], m["quiet"]))
    ratio = ours / trivial
    verdict = "ok" if ratio <= 2 else "MISSED"
    top = ", ".join(f"{name} {ms:.0f} ms" for name, ms in m["packages"][:8])
    lines = [
        "## Cold start: process start -> first answer",
        "",
        f"`bench/coldstart_bench.py`, {datetime.now(UTC):%Y-%m-%d}, {machine_line}. Each round spawns "
        "`functions-framework --target create_verification` (functions/main.py, LOG_FORMAT=json) and a trivial "
        "function (bench/trivial_function.py: answers 201, imports nothing) and the dependencies-only function "
        "(bench/floor_function.py) and times spawn -> first answer "
        f"read, alternating; median of {len(m['ours'])} (rounds over the load limit skipped when a quiet one exists). Load average per round: {', '.join(m['loads'])}.",
        "",
        "| function | first answer (median) | runs | ÷ trivial (target ≤ 2x) |",
        "|---|---|---|---|",
        f"| create_verification, first 201 | **{ours:.3f} s** | {', '.join(f'{x:.3f}' for x in m['ours'])} | "
        f"**{ratio:.2f}x** ({verdict}) |",
        f"| trivial function, first 201 | {trivial:.3f} s | {', '.join(f'{x:.3f}' for x in m['trivial'])} | 1.00x |",
        f"| dependencies only (bench/floor_function.py), first 201 | {floor:.3f} s | "
        f"{', '.join(f'{x:.3f}' for x in m['floor'])} | {floor / trivial:.2f}x |",
        "",
        "The third row is the floor of this target: a function that imports only the libraries create's first "
        "answer cannot do without (pydantic and pg8000, fixed by the design card, and email_validator), "
        "validates a small model and the address and runs one statement on a fresh connection, with no code "
        f"of ours. Our own start-up and first create cost {ours - floor:.3f} s above it "
        f"({(ours - floor) / trivial:.2f}x the trivial function); the target leaves "
        f"{max(0.0, 2 * trivial - floor):.3f} s for it.",
        "",
        f"`python -c 'import main'` (wall, fresh interpreter): {m['main_ms']:.0f} ms (`python -c pass`: "
        f"{m['bare_ms']:.0f} ms; {m['bytecode']}). Heaviest packages (`-X importtime`, self time of all their modules): {top}.",
        f"Kept off the first answer's path: google-cloud-logging's handler, {m['logging_ms']:.0f} ms to import "
        "(built in a background thread once the first response is sent; records are held and written then, "
        "with their request's trace ids); the Cloud SQL connector, "
        f"{m['connector_ms']:.0f} ms to import, is imported only when INSTANCE_CONNECTION_NAME is set (every "
        "deployed target dials Cloud SQL through it, so there it is on the path of the first database call); "
        "Secret Manager only for `sm://` values (infra injects secrets as environment variables). "
        "Each target imports only its own modules (the edge module functions/main.py `EDGES` names for it, pinned by "
        "tests/integration/test_function_startup.py): create_verification never loads cryptography, urllib3, "
        "phonenumbers, the dispatcher or the reconciler, nor (config/ reads each concern's settings from a "
        "light module of its own) the renderer, the channel adapters, smtplib, the outbox transitions, the "
        "migration runner, the signals, confirm or the confirmation pages; email_validator is imported by the "
        "first email destination.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = common.arguments(__doc__)
    args = parser.parse_args(argv)
    params = server()
    m = measure(params, 2 if args.quick else 5)
    section = report(m, machine(params))
    common.publish(SECTION, section, args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
