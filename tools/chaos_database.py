"""The chaos run's own PostgreSQL (tools/chaos.py): an embedded server in the run's directory, never
the shared test server, that can be stopped and started mid-run with pgserver's pg_ctl."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from signup_verification.local import embedded


class PrivateServer:
    """An embedded PostgreSQL of the run's own, restartable (pgserver's pg_ctl)."""

    def __init__(self, data_dir: Path):
        self.data_dir = data_dir
        admin = embedded.start(
            data_dir,
            stop_at_exit=False,
            settings={"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"},
        )
        import pgserver  # after embedded.start, which points pgserver's runtime dir somewhere writable

        self.server = pgserver.get_server(data_dir, cleanup_mode=None)
        self.params = embedded.ensure_database(admin, "chaos")
        if admin.unix_sock is None:  # the embedded server listens on a unix socket only
            raise RuntimeError("the embedded PostgreSQL gave no unix socket")
        self.socket_dir = str(Path(admin.unix_sock).parent)

    def _pg_ctl(self, *args: str) -> None:
        from pgserver import _commands

        pg_ctl = _commands.pg_ctl  # type: ignore[attr-defined]  # pgserver's own wrapper, not re-exported
        pg_ctl(["-w", *args], pgdata=self.data_dir, user=self.server.system_user, timeout=60)

    def restart(self, outage: float) -> float:
        """Stop (fast: every session is terminated, as in a failover), stay down, start. Returns seconds down."""
        started = time.monotonic()
        self._pg_ctl("-m", "fast", "stop")
        time.sleep(outage)
        self._pg_ctl("-o", '-h ""', "-o", f"-k {self.socket_dir}", "-l", str(self.data_dir / "log"), "start")
        return time.monotonic() - started

    def stop(self) -> None:
        try:
            self._pg_ctl("-m", "fast", "stop")
        except subprocess.CalledProcessError:
            pass
