"""Where a command's database is when nothing names one (outside production, no DATABASE_URL), and
the one line that says so. The local dir is one per checkout or per user, whatever the working
directory (platform/config.py, VERIFY_LOCAL_DIR):

- beside a running `verifyctl dev` of that local dir, its database, transports and webhooks
  (local/devenv.py); said when the user neither chose the local dir nor stands in it;
- else the embedded server in <local dir>/pg: started when stopped (it keeps running for the next
  command), said every time it is started;
- a local dir without an embedded database gets one from `verifyctl migrate` (said) or `verifyctl dev`,
  never from another command: that one answers, in one line, where it looked and what to do, instead
  of starting an empty server and leaving it running.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..platform.config import source_checkout
from . import embedded

if TYPE_CHECKING:
    from ..config import Config

CREATES = frozenset({"migrate"})  # the commands that may create an embedded database


def dev_note(config: Config, state: dict[str, Any] | None) -> str | None:
    """The line for a command that found a running `verifyctl dev`, when the user may not expect it."""
    if state is None or _expected(config.local_dir):
        return None
    return f"using the `verifyctl dev` running for {config.local_dir} (pid {state['pid']}): its database and mailbox"


def embedded_note(config: Config, command: str) -> str | None:
    """The line for a command about to use the embedded server of the local dir (None: nothing to say),
    or ValueError when there is none and this command may not create one."""
    data_dir = config.local_dir / "pg"
    if embedded.running(data_dir):
        return None if _expected(config.local_dir) else f"using the embedded PostgreSQL in {data_dir}"
    if (data_dir / "PG_VERSION").is_file():
        return f"starting the embedded PostgreSQL in {data_dir} (DATABASE_URL is unset); {_keeps_running(config)}"
    if command in CREATES:
        return f"creating an embedded PostgreSQL in {data_dir} (DATABASE_URL is unset); {_keeps_running(config)}"
    raise ValueError(
        f"no database: DATABASE_URL is unset, no `verifyctl dev` runs for {config.local_dir} and it holds no "
        "embedded database: start one there with `python3 dev.py run` (or `verifyctl dev`) or `verifyctl migrate`, "
        "or set DATABASE_URL (or VERIFY_LOCAL_DIR, to use another folder's)"
    )


def _expected(local_dir: Path) -> bool:
    """The user chose the local dir (VERIFY_LOCAL_DIR) or works in the folder that holds it."""
    return bool(os.environ.get("VERIFY_LOCAL_DIR")) or Path.cwd().resolve() == local_dir.parent


def _keeps_running(config: Config) -> str:
    checkout = source_checkout()
    if checkout is not None:
        return f"it keeps running for the next command: `python3 dev.py stop` in {checkout} stops it"
    pid_file = config.local_dir / "pg" / "postmaster.pid"
    return f"it keeps running for the next command: `kill -INT $(head -1 {pid_file})` stops it"
