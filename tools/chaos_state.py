"""The configuration and the state tools/chaos.py's Run shares with its parts (chaos_injections.py,
chaos_workers.py, chaos_fanout.py, chaos_creates.py): declared here once so each part type-checks on
its own."""

from __future__ import annotations

import dataclasses
import threading
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos_checks import Ledger
from chaos_database import PrivateServer
from chaos_fallback import Traffic
from chaos_faults import FaultRates
from signup_verification.verifications.config import CreateConfig
from signup_verification.verifications.tokens import Keyring


@dataclass(frozen=True)
class ChaosConfig:
    intents: int = 5000
    workers: int = 4
    seed: int = 20261129
    sms_share: float = 0.2
    supersede_share: float = 0.05
    short_ttl_share: float = 0.05  # created with the shortest TTL (30 s): some expire while the run is faulty
    chaos_seconds: float = 90.0  # kills, provider faults and the restart happen within this
    kill_every: tuple[float, float] = (1.0, 4.0)
    fault_launch_share: float = (
        0.12  # dispatch launches that kill themselves at a fault point (tools/fault_dispatch.py)
    )
    pg_restart_at: float = 0.3  # fraction of the chaos phase
    pg_outage_seconds: float = 2.0
    pause_at: float = 0.45  # one worker frozen past its lease (stale writes on resume)
    reconcile_every: float = 2.0
    send_timeout: float = 1.5
    max_seconds: float = 600.0  # the whole run, draining included: after that it stops and reports
    rates: FaultRates = field(default_factory=FaultRates)
    fallback_share: float = 0.25  # created with a fallback channel (tools/chaos_fallback.py)
    attack_share: float = 0.04  # more signups, an attacker's, to destinations it chose (tools/chaos_attack.py)

    @classmethod
    def quick(cls, **overrides) -> ChaosConfig:
        return dataclasses.replace(
            cls(intents=400, chaos_seconds=20.0, kill_every=(1.0, 3.0), max_seconds=150.0), **overrides
        )


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
    ledger: Ledger
    keyring: Keyring
    fallback: Traffic
    create_settings: CreateConfig

    def _elapsed(self) -> float:
        raise NotImplementedError

    def check_budget(self, out: str, frozen: bool) -> None:
        raise NotImplementedError
