#!/usr/bin/env python3
"""Bootstrap and run: needs nothing but Python >= 3.11.

    python3 dev.py run    # the whole service locally on embedded PostgreSQL + local mailbox
    python3 dev.py test   # the full test suite (fast subset: .venv/bin/pytest -x -q)

Creates .venv on first use, and again when the lock changes: every distribution from
requirements/dev.txt (pinned, hash-checked: what CI tests), then the project itself, editable.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".lock.sha256"
LOCK = ROOT / "requirements" / "dev.txt"


def _inputs_hash() -> str:
    digest = hashlib.sha256()
    for path in (ROOT / "pyproject.toml", LOCK):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def ensure_venv() -> None:
    if sys.version_info < (3, 11):
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
    STAMP.write_text(_inputs_hash())


def main(argv: list[str]) -> int:
    if argv and argv[0] in {"-h", "--help", "help"}:
        print(__doc__.strip())
        return 0
    if not argv or argv[0] not in {"run", "test", "setup"}:
        print(__doc__.strip(), file=sys.stderr)
        return 2
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
