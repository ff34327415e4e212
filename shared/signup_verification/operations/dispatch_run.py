"""What one dispatch invocation runs with: its DispatchRun (the instance's connection, config, keyring
and channel adapters, who started it, the hooks its callers may set) and its lease owner.

Its callers (the dispatch target, `verifyctl dispatch`, a fan-out or nudge task, the crash tests,
tools/chaos.py and the benches) build the run; the dispatcher (dispatcher.py) drives its pipeline
with it and re-exports these names, so a caller imports what it runs from one module.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..delivery.channels.base import Channel
from ..delivery.fanout import Invocation
from ..platform.database import Database
from ..platform.tasks import TaskStarter
from ..verifications.tokens import Keyring
from .config import DispatchConfig

__all__ = ["DispatchRun", "FAULT_POINTS", "FaultHook", "new_lease_owner"]

# The points a fault hook is called at (the crash tests and tools/chaos.py kill the process there).
FAULT_POINTS = ("after_claim", "after_begin", "after_send")
FaultHook = Callable[[str], None]


@dataclass(frozen=True)
class DispatchRun:
    """One invocation's context: the instance's connection, config, keyring and channel adapters (the
    Runtime's, reused across invocations), who started it, and the hooks its callers may set."""

    db: Database
    config: DispatchConfig
    keyring: Keyring
    channels: Mapping[str, Channel]
    stop: threading.Event = dataclasses.field(default_factory=threading.Event)  # set: shut down (SIGTERM)
    invocation: Invocation = Invocation()  # the scheduler's, a create's nudge, or a fan-out task's (its slot)
    tasks: TaskStarter | None = None  # how the fan-out starts more (dispatch(): the instance's own)
    fault: FaultHook | None = None  # called at each of FAULT_POINTS (the crash tests, the chaos run)
    close_channels: Callable[[], None] | None = None  # the Runtime's: once shutdown began, SMTP says QUIT


def new_lease_owner(deployment: str) -> str:
    """Unique per invocation: a restarted process or a second invocation never shares a fence."""
    return f"{deployment}:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
