"""verifyctl's own embedded PostgreSQL, as an operator meets it on a laptop: only `verifyctl migrate`
creates it, each start is said, and `python3 dev.py stop` stops it. A server of its own that outlives
the commands that start it: a system test (tests/support/tiers.py)."""

from __future__ import annotations

import os
import subprocess
import sys

from signup_verification.local import embedded
from support.dev_process import stop_servers_under
from support.paths import ROOT, TEST_TOKEN_KEYS


def test_only_migrate_creates_the_embedded_database_each_start_is_said_and_dev_py_stop_stops_it(tmp_path):
    local = tmp_path / "local"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "WEBHOOK_URL")}
    env.update(VERIFY_LOCAL_DIR=str(local), TOKEN_KEYS=TEST_TOKEN_KEYS)

    def verifyctl(*argv: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "signup_verification.cli", *argv]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)

    def dev_py_stop() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(ROOT / "dev.py"), "stop"], env=env, capture_output=True,
                              text=True, timeout=60)  # fmt: skip

    assert "embedded" not in verifyctl("new-key").stderr  # a command without a database starts none
    refused = verifyctl("status")  # no database there yet: said, and none is made
    assert refused.returncode == 1 and "verifyctl: no database: DATABASE_URL is unset" in refused.stderr
    assert refused.stderr.startswith("verifyctl: ") and refused.stderr.count("\n") == 1  # one line
    assert not (local / "pg").exists()
    try:
        created = verifyctl("migrate")
        assert created.returncode == 0 and "Traceback" not in created.stderr
        assert f"verifyctl: creating an embedded PostgreSQL in {local / 'pg'}" in created.stderr
        assert f"`python3 dev.py stop` in {ROOT} stops it" in created.stderr
        assert embedded.running(local / "pg")
        again = verifyctl("status")
        assert again.returncode == 0 and again.stderr == ""  # it was running, where VERIFY_LOCAL_DIR says
        stopped = dev_py_stop()
        assert stopped.returncode == 0 and f"stopped the embedded database server in {local / 'pg'}" in stopped.stdout
        assert not embedded.running(local / "pg")
        restarted = verifyctl("status")
        assert restarted.returncode == 0 and f"verifyctl: starting the embedded PostgreSQL in {local / 'pg'}" in (
            restarted.stderr
        )
        assert dev_py_stop().returncode == 0 and not embedded.running(local / "pg")
    finally:
        stop_servers_under(local)
