"""The function targets of `verifyctl dev`, one functions-framework process each, their output
forwarded line by line.

gunicorn retries a busy port for five seconds, logging two lines a second, then exits: those lines
are held back and the target reports the port busy (ports.PortInUse, one line) instead. A target
counts as started once the process itself holds its port's listening socket, not when something
answers there (another program may have taken the port between the check and the bind).
"""

from __future__ import annotations

import ctypes
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from . import ports

# gunicorn's own bind-failure lines (gunicorn/sock.py: "Connection in use", "connection to ... failed",
# "Retrying in 1 second.", "Can't connect to").
_BIND_FAILURE = re.compile(r"Connection in use: |connection to \(.*\) failed: |Retrying in 1 second|Can't connect to ")


class StartFailed(RuntimeError):
    """A target that exited or never listened while starting."""


class Target:
    def __init__(self, name: str, port: int, process: subprocess.Popen, write: Callable[[str], None]):
        self.name, self.port, self.process = name, port, process
        self.port_in_use = False
        self._write = write
        self._reader = threading.Thread(target=self._forward, name=f"output-{name}", daemon=True)

    def forward(self) -> None:
        """Start passing its output on (after every process is spawned: threads and fork do not mix)."""
        self._reader.start()

    def _forward(self) -> None:
        stream: IO[str] | None = self.process.stdout
        for line in stream or ():
            if _BIND_FAILURE.search(line):
                self.port_in_use = True
                continue
            self._write(line)

    def wait_listening(self, host: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.ended()
            if status is not None:
                raise StartFailed(f"{self.name} exited with status {status} while starting (its output is above)")
            if self._listens(host):
                return
            time.sleep(0.1)
        raise StartFailed(f"{self.name} did not listen on port {self.port} within {timeout:.0f} s")

    def ended(self) -> int | None:
        """None while it runs, else its exit status; a busy port raises PortInUse (even while gunicorn
        still retries it)."""
        if self.port_in_use:
            raise ports.PortInUse(self.port, self.name)
        status = self.process.poll()
        if status is None:
            return None
        self._reader.join(timeout=2)  # its last lines, a busy port's among them
        if self.port_in_use:
            raise ports.PortInUse(self.port, self.name)
        return status

    def _listens(self, host: str) -> bool:
        import socket

        try:
            socket.create_connection((host, self.port), timeout=0.5).close()
        except OSError:
            return False
        return ports.listens(self.process.pid, self.port) is not False


def spawn(name: str, port: int, source: Path, host: str, env: dict[str, str], write: Callable[[str], None]) -> Target:
    argv = [sys.executable, "-m", "functions_framework", "--target", name, "--source", str(source),
            "--host", host, "--port", str(port)]  # fmt: skip
    process = subprocess.Popen(
        argv,
        env=env,
        start_new_session=True,
        preexec_fn=_die_with_parent,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    return Target(name, port, process, write)


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM if `verifyctl dev` itself is killed (Linux)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
