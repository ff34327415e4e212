"""The ports `verifyctl dev` listens on. A busy port is always the same one line, naming the port,
what wanted it and the options that move it: whether it was seen busy before anything started,
or taken at the same instant by another program (between the check and the bind)."""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path
from typing import Any

from werkzeug.serving import make_server

HINT = "Choose other ports with --base-port / --smtp-port / --mailbox-port / --site-port."


class PortInUse(RuntimeError):
    def __init__(self, port: int, what: str):
        super().__init__(f"port {port} ({what}) is in use: is another `verifyctl dev` running? {HINT}")


def check_free(host: str, port: int, what: str) -> None:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            raise PortInUse(port, what) from None


def in_use(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE


def wsgi_server(host: str, port: int, app: Any, what: str, **options: Any) -> Any:
    """werkzeug's server on a socket bound here: werkzeug's own bind prints two lines and exits."""
    try:
        listener = socket.create_server((host, port))
    except OSError as exc:
        if in_use(exc):
            raise PortInUse(port, what) from None
        raise
    try:
        return make_server(host, port, app, fd=listener.fileno(), **options)  # it keeps a duplicate
    finally:
        listener.close()


def listens(pid: int, port: int) -> bool | None:
    """Whether process `pid` holds the listening socket of `port` (Linux /proc), so a listener some
    other program started on it meanwhile does not pass for ours; None where /proc cannot tell."""
    try:
        inodes = {_listening_inode(line, port) for name in ("tcp", "tcp6") for line in _lines(f"/proc/net/{name}")}
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return None
    wanted = {f"socket:[{i}]" for i in inodes if i is not None}
    return bool(wanted) and any(_link(fd) in wanted for fd in fds)


def _link(fd: Path) -> str | None:
    try:
        return os.readlink(fd)
    except OSError:  # closed meanwhile
        return None


def _lines(path: str) -> list[str]:
    with open(path, encoding="ascii") as table:
        return table.readlines()[1:]


def _listening_inode(line: str, port: int) -> str | None:
    fields = line.split()
    if len(fields) < 10 or fields[3] != "0A":  # 0A: TCP_LISTEN
        return None
    return fields[9] if int(fields[1].rsplit(":", 1)[1], 16) == port else None
