"""`verifyctl dev`: the service on a laptop. Starts the embedded PostgreSQL, applies migrations and
serves every function target with functions-framework on its own port. Ctrl-C stops everything."""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from .. import embedded, migrations
from ..database import Database
from ..settings import REPO_ROOT, Settings

# target -> port offset from --base-port
TARGETS = {"create_verification": 0}


def run(settings: Settings, args: argparse.Namespace) -> int:
    if settings.database_url:
        url = settings.database_url
    else:
        server = embedded.start(settings.local_dir / "pg", stop_at_exit=True)
        url = embedded.ensure_database(server, embedded.DEFAULT_DATABASE).url()
    applied = migrations.migrate(Database.from_url(url, application_name="verifyctl-dev"))
    print(f"database ready ({len(applied)} migration(s) applied)", flush=True)
    env = {**os.environ, "DATABASE_URL": url}
    children: list[subprocess.Popen] = []
    try:
        for target, offset in TARGETS.items():
            port = args.base_port + offset
            children.append(subprocess.Popen(
                [sys.executable, "-m", "functions_framework", "--target", target,
                 "--source", str(REPO_ROOT / "functions" / "main.py"), "--host", args.host, "--port", str(port)],
                env=env, start_new_session=True))
            print(f"{target:<22} http://{args.host}:{port}/", flush=True)
        print("Ctrl-C stops everything.", flush=True)
        while all(child.poll() is None for child in children):
            time.sleep(0.5)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        for child in children:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGTERM)
        for child in children:
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
        embedded.stop_all()
