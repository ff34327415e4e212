"""`verifyctl dev` as a subprocess for the tests: free ports, its output, and what it leaves behind."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

READY_LINE = "Ctrl-C stops everything."


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_ports() -> dict[str, int]:
    """A base port with its 6 successors free (delivery_reports is base + 5), plus SMTP, mailbox and
    demo site ports."""
    for _ in range(200):
        # below Linux's ephemeral range (32768-60999): a port checked free here cannot be taken as the
        # source port of some outbound connection before `verifyctl dev` binds it (seen as a flaky
        # "Port ... is in use" from the mailbox)
        base = random.randrange(20000, 32700, 10)
        ports = {"base": base, "smtp": base + 7, "mailbox": base + 8, "site": base + 9}
        if all(_free(p) for p in [*range(base, base + 6), base + 7, base + 8, base + 9]):
            return ports
    raise RuntimeError("no free port block")


def process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) for every live process."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
            state = stat[stat.rindex(")") + 2 :].split()[0]
            if state == "Z":
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue
        table[int(entry.name)] = (ppid, cmdline)
    return table


def descendants(pid: int) -> set[int]:
    table = process_table()
    found, frontier = set(), {pid}
    while frontier:
        children = {p for p, (ppid, _) in table.items() if ppid in frontier} - found
        found |= children
        frontier = children
    return found


def kill(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def servers_under(folder: Path) -> dict[int, str]:
    """Live processes whose command line names a path inside `folder` (an embedded PostgreSQL's
    `-D <data dir>`), pid -> command line."""
    prefix = str(folder.resolve()) + "/"
    return {pid: cmd for pid, (_, cmd) in process_table().items() if prefix in cmd and pid != os.getpid()}


def stop_servers_under(folder: Path, timeout: float = 30.0) -> dict[int, str]:
    """Stop them (SIGINT: PostgreSQL's fast shutdown, then SIGKILL); returns what was running."""
    found = servers_under(folder)
    for pid in found:
        try:
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while set(found) & set(process_table()) and time.monotonic() < deadline:
        time.sleep(0.1)
    kill(set(found) & set(process_table()))
    return found


class DevProcess:
    def __init__(self, env: dict[str, str], *extra_args: str, cwd: Path | None = None, sigint_ignored: bool = False):
        self.ports = free_ports()
        self._sigint_ignored = sigint_ignored  # as `cmd &`, nohup and some CI runners start it
        self.lines: list[str] = []
        self._env = {**os.environ, **env, "PYTHONUNBUFFERED": "1"}
        self._args = [
            sys.executable,
            "-m",
            "signup_verification.cli",
            "dev",
            "--base-port",
            str(self.ports["base"]),
            "--smtp-port",
            str(self.ports["smtp"]),
            "--mailbox-port",
            str(self.ports["mailbox"]),
            "--site-port",
            str(self.ports["site"]),
            *extra_args,
        ]
        self._cwd = cwd
        self.process: subprocess.Popen | None = None

    def url(self, offset: int) -> str:
        return f"http://localhost:{self.ports['base'] + offset}/"

    @property
    def create_url(self) -> str:
        return self.url(0)

    @property
    def confirm_url(self) -> str:
        return self.url(1)

    @property
    def mailbox_url(self) -> str:
        return f"http://localhost:{self.ports['mailbox']}"

    @property
    def site_url(self) -> str:
        """The demo signup site, without a trailing slash: also its origin."""
        return f"http://localhost:{self.ports['site']}"

    def start(self, timeout: float = 120.0) -> DevProcess:
        ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if self._sigint_ignored else None
        self.process = subprocess.Popen(
            self._args,
            env=self._env,
            cwd=self._cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            preexec_fn=ignore,
        )
        threading.Thread(target=self._read, daemon=True).start()
        self.wait_for_line(READY_LINE, timeout)
        return self

    def _read(self) -> None:
        assert self.process and self.process.stdout
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for_line(self, text: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if text in line:
                    return line
            if self.process and self.process.poll() is not None:
                time.sleep(0.2)  # let the reader drain
                raise AssertionError(f"verifyctl dev exited {self.process.returncode}:\n" + "\n".join(self.lines))
            time.sleep(0.05)
        raise AssertionError(f"no line {text!r} within {timeout} s:\n" + "\n".join(self.lines))

    def interrupt(self, timeout: float = 60.0) -> int:
        """Ctrl-C, as a terminal sends it; returns the exit status."""
        assert self.process
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=timeout)

    def close(self) -> None:
        """As Ctrl-C first, so it stops what it started (its embedded database is no child of it:
        pg_ctl detaches it); then whatever is left, that database included."""
        if self.process and self.process.poll() is None:
            started = descendants(self.process.pid)
            try:
                self.interrupt(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            kill(started & set(process_table()))
        local = self._env.get("VERIFY_LOCAL_DIR")
        if local:
            stop_servers_under(Path(local))

    def __enter__(self) -> DevProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
