"""tools/fault_dispatch.py, the crash tests' and the chaos run's way to kill a dispatch at a fault
point: refused in production, and only the dispatcher's declared points are accepted."""

from __future__ import annotations

import os
import subprocess
import sys

from support.paths import ROOT


def _fault_dispatch(*args: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("ENVIRONMENT", "DATABASE_URL")}
    return subprocess.run(
        [sys.executable, "tools/fault_dispatch.py", *args],
        env={**base, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_fault_hook_is_refused_in_production_before_any_connection():
    done = _fault_dispatch("after_claim", ENVIRONMENT="production", DATABASE_URL="postgresql://nobody@127.0.0.1:1/x")
    assert done.returncode == 1
    assert done.stderr.strip() == "verifyctl: fault injection is refused in production"


def test_only_the_dispatchers_fault_points_are_accepted():
    done = _fault_dispatch("after_lunch")
    assert done.returncode == 2
    assert done.stderr.strip() == "usage: fault_dispatch.py after_claim|after_begin|after_send"
