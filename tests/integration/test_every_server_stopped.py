"""The session's last check (support/fixtures.py `_every_server_stopped`) sees a server a test left
running: a child of the test process, or a process whose command line names a test's temporary
folder (an embedded PostgreSQL's data directory), and stops it."""

from __future__ import annotations

import os
import subprocess
import sys

from support.dev_process import descendants, servers_under, stop_servers_under


def test_a_server_left_in_a_test_folder_is_seen_and_stopped(tmp_path):
    data_dir = tmp_path / "pg"
    left = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "-D", str(data_dir)])
    try:
        assert left.pid in descendants(os.getpid())
        assert left.pid in servers_under(tmp_path) and left.pid not in servers_under(tmp_path / "elsewhere")
        assert left.pid in stop_servers_under(tmp_path)
        assert left.wait(timeout=10) is not None and left.pid not in servers_under(tmp_path)
    finally:
        left.kill()
        left.wait()
