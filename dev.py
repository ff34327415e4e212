#!/usr/bin/env python3
"""Bootstrap and run: needs nothing but Python >= 3.11.

    python3 dev.py run [--fast ...]   # the whole service locally (verifyctl dev): embedded PostgreSQL + mailbox
    python3 dev.py test [pytest args] # the full test suite (fast subset: .venv/bin/pytest tests/unit tests/integration -x -q)
    python3 dev.py stop               # stop a running `dev.py run` and the embedded database verifyctl starts (.local/pg)
    python3 dev.py stop-test-db       # stop the test database server the tests leave running (.local/test-pg)
    python3 dev.py rehearse [--keep]  # the deployment rehearsed: every job and service of the plan from the bundle
                                      # (tools/rehearse_deploy.py; needs terraform and ../shared/tools/terraform-offline)
    python3 dev.py setup              # only create or refresh .venv

Creates .venv on first use, and again when the lock changes: every distribution from
requirements/dev.txt (pinned, hash-checked: what CI tests), then the project itself and its client
library (clients/python), editable.
"""

from __future__ import annotations

import hashlib
import json
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
# verifyctl's local folder (VERIFY_LOCAL_DIR, else the checkout's .local): the embedded database it
# starts when DATABASE_URL is unset (and says so), and the state file of a running `verifyctl dev`.
LOCAL = Path(os.environ.get("VERIFY_LOCAL_DIR") or ROOT / ".local")
DEV_DB, DEV_STATE = LOCAL / "pg", LOCAL / "dev.json"


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


def _stop_postgres(data_dir: Path, what: str) -> int:
    """Fast shutdown (SIGINT to the postmaster, as `pg_ctl stop -m fast` sends), then wait for it."""
    try:
        pid = int((data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
        os.kill(pid, signal.SIGINT)
    except (OSError, ValueError):
        print(f"dev.py: no {what} server is running in {data_dir}")
        return 0
    if _wait_gone(pid):
        print(f"dev.py: stopped the {what} server in {data_dir}")
        return 0
    print(f"dev.py: the {what} server (pid {pid}) did not stop within 30 s", file=sys.stderr)
    return 1


def _wait_gone(pid: int, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def stop_test_db() -> int:
    return _stop_postgres(TEST_DB, "test database")


def _stop_dev_server() -> int:
    """A `dev.py run` (verifyctl dev) of this checkout: SIGTERM, as Ctrl-C, so it stops what it started."""
    try:
        pid = int(json.loads(DEV_STATE.read_text())["pid"])
        if not _is_verifyctl_dev(pid):  # a stale file whose pid now names another process
            return 0
        os.kill(pid, signal.SIGTERM)
    except (OSError, ValueError, KeyError, TypeError):
        return 0
    if _wait_gone(pid, 60.0):
        print(f"dev.py: stopped `dev.py run` (pid {pid})")
        return 0
    print(f"dev.py: `dev.py run` (pid {pid}) did not stop within 60 s", file=sys.stderr)
    return 1


def _is_verifyctl_dev(pid: int) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return os.name != "posix" or not Path("/proc/self").exists()  # no /proc to ask: trust the state file
    return b"dev" in argv and any(b"verifyctl" in a or b"signup_verification" in a for a in argv)


def stop() -> int:
    """Not the test database: a test run beside it may be using it (`stop-test-db` is for that)."""
    return max(_stop_dev_server(), _stop_postgres(DEV_DB, "embedded database"))


def main(argv: list[str]) -> int:
    if argv and argv[0] in {"-h", "--help", "help"}:
        print(__doc__.strip())
        return 0
    if not argv or argv[0] not in {"run", "test", "setup", "stop", "stop-test-db", "rehearse"}:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    if argv[0] == "stop-test-db":
        return stop_test_db()
    if argv[0] == "stop":
        return stop()
    ensure_venv()
    command, rest = argv[0], argv[1:]
    if command == "setup":
        return 0
    if command == "run":
        args = [str(BIN / "verifyctl"), "dev", *rest]
    elif command == "rehearse":
        args = [str(BIN / "python"), str(ROOT / "tools" / "rehearse_deploy.py"), *rest]
    else:
        args = [str(BIN / "python"), "-m", "pytest", "--run-slow", "-q", *rest]
    os.chdir(ROOT)
    os.execv(args[0], args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
