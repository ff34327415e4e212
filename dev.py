#!/usr/bin/env python3
"""Bootstrap and run: needs nothing but Python >= 3.11.

    python3 dev.py run [--fast ...]   # the whole service locally (verifyctl dev): embedded PostgreSQL + mailbox
    python3 dev.py test [pytest args] # the full test suite (fast subset: .venv/bin/pytest tests/unit tests/integration -x -q)
    python3 dev.py stop-test-db       # stop the test database server the tests leave running (.local/test-pg)
    python3 dev.py setup              # only create or refresh .venv

Creates .venv on first use, and again when the lock changes: every distribution from
requirements/dev.txt (pinned, hash-checked: what CI tests), then the project itself and its client
library (clients/python), editable.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".lock.sha256"
LOCK = ROOT / "requirements" / "dev.txt"
CLIENT = ROOT / "clients" / "python"  # the signup site's client library: its own distribution
TEST_DB = ROOT / ".local" / "test-pg"  # tests/support/fixtures.py: left running between runs (a restart costs seconds)


def _inputs_hash() -> str:
    digest = hashlib.sha256()
    for path in (ROOT / "pyproject.toml", LOCK, CLIENT / "pyproject.toml"):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def ensure_venv() -> None:
    if sys.version_info < (3, 11):  # noqa: UP036  (dev.py runs under whatever python3 a fresh machine has)
        sys.exit("dev.py: Python 3.11 or newer is required")
    if STAMP.exists() and STAMP.read_text() == _inputs_hash():
        return
    if not (BIN / "python").exists():
        print("dev.py: creating .venv", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    pip = [str(BIN / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    print("dev.py: installing the locked dependencies (requirements/dev.txt) and the project into .venv", flush=True)
    subprocess.run(pip + ["install", "--require-hashes", "-r", str(LOCK)], check=True)
    subprocess.run(pip + ["install", "--no-deps", "-e", str(ROOT)], check=True)
    # Its dependencies are in the lock (the test extra); the demo site and tests/ use it.
    subprocess.run(pip + ["install", "--no-deps", "-e", str(CLIENT)], check=True)
    STAMP.write_text(_inputs_hash())


def stop_test_db() -> int:
    """Fast shutdown (SIGINT to the postmaster, as `pg_ctl stop -m fast` sends), then wait for it."""
    try:
        pid = int((TEST_DB / "postmaster.pid").read_text().split("\n", 1)[0])
        os.kill(pid, signal.SIGINT)
    except (OSError, ValueError):
        print(f"dev.py: no test database server is running in {TEST_DB}")
        return 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            print(f"dev.py: stopped the test database server in {TEST_DB}")
            return 0
        time.sleep(0.1)
    print(f"dev.py: the test database server (pid {pid}) did not stop within 30 s", file=sys.stderr)
    return 1


def main(argv: list[str]) -> int:
    if argv and argv[0] in {"-h", "--help", "help"}:
        print(__doc__.strip())
        return 0
    if not argv or argv[0] not in {"run", "test", "setup", "stop-test-db"}:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    if argv[0] == "stop-test-db":
        return stop_test_db()
    ensure_venv()
    command, rest = argv[0], argv[1:]
    if command == "setup":
        return 0
    if command == "run":
        args = [str(BIN / "verifyctl"), "dev", *rest]
    else:
        args = [str(BIN / "python"), "-m", "pytest", "--run-slow", "-q", *rest]
    os.chdir(ROOT)
    os.execv(args[0], args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
