"""functions/main.py's targets under functions-framework's own server, as Cloud Run runs them
(`functions-framework --target ...`: gunicorn, keep-alive, its request drain), one subprocess per
target on loopback, against the database the caller names."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from support.paths import ROOT


@dataclass(frozen=True)
class Served:
    urls: dict[str, str]  # target -> http://127.0.0.1:<port>/
    logs: dict[str, Path]  # target -> the file its server's stdout and stderr go to

    def output(self, target: str) -> str:
        return self.logs[target].read_text(errors="replace")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_listening(port: int, process: subprocess.Popen, log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"functions-framework exited {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"functions-framework not listening on {port} within {timeout} s:\n{log.read_text()[-3000:]}")


@contextmanager
def functions_framework(
    targets: list[str], env: dict[str, str], log_dir: Path, ports: dict[str, int] | None = None
) -> Iterator[Served]:
    """Every target served by `python -m functions_framework` (1 worker, 2 threads unless `env` says
    THREADS) while the block runs; `ports` fixes some targets' ports (a target that calls itself)."""
    processes: dict[str, subprocess.Popen] = {}
    ports = {target: (ports or {}).get(target) or free_port() for target in targets}
    logs = {target: log_dir / f"{target}.log" for target in targets}
    child_env = {**os.environ, "WORKERS": "1", "THREADS": "2", "PYTHONUNBUFFERED": "1", **env}
    try:
        for target in targets:
            with logs[target].open("wb") as log:
                processes[target] = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "functions_framework",
                        "--target",
                        target,
                        "--source",
                        str(ROOT / "functions" / "main.py"),
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(ports[target]),
                    ],
                    env={**child_env, "FUNCTION_TARGET": target},  # never one an earlier test left set
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,  # gunicorn's master and worker: one process group to stop
                )
        for target in targets:
            _wait_listening(ports[target], processes[target], logs[target])
        yield Served({t: f"http://127.0.0.1:{p}/" for t, p in ports.items()}, logs)
    finally:
        for process in processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
