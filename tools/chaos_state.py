"""The state tools/chaos.py's Run shares with its parts (chaos_injections.py, chaos_workers.py): declared
here once so each part type-checks on its own."""

from __future__ import annotations

import threading
from collections import defaultdict, deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos_database import PrivateServer

if TYPE_CHECKING:
    from chaos import ChaosConfig


class RunState:
    """Set by chaos.Run (its __init__ and start)."""

    config: ChaosConfig
    workdir: Path
    pg: PrivateServer
    env: dict[str, str]
    figures: defaultdict[str, Any]
    lock: threading.Lock
    slots: list[dict]
    stopping: threading.Event
    chaos_on: threading.Event
    fault_queue: deque[str]
    log: Callable[[str], object]
    errors: list[str]
    overruns: list[str]

    def _elapsed(self) -> float:
        raise NotImplementedError

    def check_budget(self, out: str, frozen: bool) -> None:
        raise NotImplementedError
