"""The embedded PostgreSQL 16 server (pgserver wheel) used when DATABASE_URL is unset.

pgserver runs postgres as the system user `pgserver` when we are root, so the data directory
must be reachable by that user; it listens on a unix socket only (no TCP port to collide on).
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from ..platform.catalogue import catalogue
from ..platform.database import ConnectionParams

_SQL = catalogue("local")
_EMBEDDED_SETTING = _SQL["embedded_setting"]
_EMBEDDED_RELOAD = _SQL["embedded_reload"]
_EMBEDDED_DATABASE_EXISTS = _SQL["embedded_database_exists"]
_EMBEDDED_CREATE_DATABASE = _SQL["embedded_create_database"]

_log = logging.getLogger(__name__)
_servers: dict[Path, object] = {}

DEFAULT_DATABASE = "verification"
_SETTING_NAME = re.compile(r"^[a-z_][a-z0-9_.]*$")


def start(data_dir: Path, *, stop_at_exit: bool = True, settings: dict[str, str] | None = None) -> ConnectionParams:
    """Start (or attach to) the embedded server in `data_dir`; returns params for its `postgres` database."""
    data_dir = Path(data_dir).resolve()
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    _make_traversable(data_dir.parent)
    _runtime_dir(data_dir.parent / "run")
    # Its progress lines (initdb, "found a running server" with a psutil dump) are not ours to show.
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    try:
        import pgserver
    except ImportError as exc:  # production bundles do not ship pgserver
        raise RuntimeError("DATABASE_URL is unset and pgserver is not installed (pip install '.[local]')") from exc
    server = pgserver.get_server(data_dir, cleanup_mode="stop" if stop_at_exit else None)
    _servers[data_dir] = server
    params = ConnectionParams.from_url(server.get_uri())
    if settings:
        con = params.connect()
        try:
            for name, value in settings.items():
                if not _SETTING_NAME.match(name):
                    raise ValueError(f"not a server setting name: {name!r}")
                con.run(_EMBEDDED_SETTING.format(name=name, value=_literal(value)))
            con.run(_EMBEDDED_RELOAD)
        finally:
            con.close()
    return params


def ensure_database(params: ConnectionParams, name: str) -> ConnectionParams:
    """Create database `name` if it does not exist; returns params pointing at it."""
    con = params.with_database("postgres").connect()
    try:
        if not con.run(_EMBEDDED_DATABASE_EXISTS, name=name):
            con.run(_EMBEDDED_CREATE_DATABASE.format(name=_identifier(name)))
    finally:
        con.close()
    return params.with_database(name)


def running(data_dir: Path) -> bool:
    """Whether a server runs in `data_dir`: its postmaster.pid names a live process."""
    try:
        pid = int((Path(data_dir) / "postmaster.pid").read_text(encoding="utf-8").split("\n", 1)[0])
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    return True


def stop(data_dir: Path) -> None:
    """Stop the server this process started in `data_dir` (and only that one), also one started to
    outlive the process (stop_at_exit=False): asked to stop, it stops unless another process of ours
    still uses it."""
    server = _servers.pop(Path(data_dir).resolve(), None)
    if server is not None:
        server.cleanup_mode = "stop"  # type: ignore[attr-defined]  # None would leave it running
        try:
            server.cleanup()  # type: ignore[attr-defined]
        except Exception as exc:  # best effort at shutdown
            _log.warning("embedded postgres did not stop cleanly: %s", exc)


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _runtime_dir(path: Path) -> None:
    """pgserver asks platformdirs for a runtime dir (its inter-process lock) at import: without
    XDG_RUNTIME_DIR, or with one that is not private (mode 0700), platformdirs warns on every command."""
    current = os.environ.get("XDG_RUNTIME_DIR")
    try:
        if current and Path(current).stat().st_mode & 0o077 == 0:
            return  # the session's own (e.g. /run/user/1000)
    except OSError:
        pass
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)
    os.environ["XDG_RUNTIME_DIR"] = str(path)


def _make_traversable(path: Path) -> None:
    """The `pgserver` system user needs o+x on every ancestor of the data directory."""
    if os.geteuid() != 0:
        return
    for parent in [path, *path.parents]:
        try:
            mode = parent.stat().st_mode
            if not mode & 0o001:
                parent.chmod(mode | 0o001)
        except OSError:
            pass
