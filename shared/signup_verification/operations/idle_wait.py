"""The idle dispatcher: with DISPATCH_IDLE_WAIT, an invocation that found the outbox empty probes it
every poll interval (outbox/idle.py: one probe of the eligible index, nothing claimed) until work
is waiting (claim it), a shutdown is asked for (the loop handles it), a newer invocation has
started waiting (it takes over), or too little time is left for a send. The probes run at a fixed
rate, so new work waits at most one interval plus a probe. Polling rather than LISTEN: pg8000 has
no blocking wait for notifications, and a poll also sees work that becomes due by time (retries,
holds, a slow-down's end), which no NOTIFY announces."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ..delivery.batch_sizing import SETTLE_RESERVE, LatencyEstimator
from ..outbox import heartbeats, idle
from ..platform.database import Database
from ..platform.deadline import Deadline
from .config import DispatchConfig

_log = logging.getLogger("signup_verification.operations.dispatcher")


def enter(db: Database, config: DispatchConfig, owner: str, elapsed_seconds: float) -> None:
    """This invocation becomes the deployment's idle waiter (unless a newer one is)."""
    idle.enter(db, heartbeats.dispatch_name(config.deployment), config.deployment, owner, elapsed_seconds)


def wait_for_work(
    db: Database,
    config: DispatchConfig,
    owner: str,
    deadline: Deadline,
    estimator: LatencyEstimator,
    stop: threading.Event,
    clock: Callable[[], float],
) -> bool:
    """True: claim again (work is waiting, or a shutdown was asked for); False: return."""
    o = config
    name = heartbeats.dispatch_name(o.deployment)
    one_send = min(estimator.worst(), o.send_timeout_seconds)  # what a batch found next would need
    next_probe = clock() + o.idle_poll_seconds
    while deadline.remaining() >= o.idle_poll_seconds + SETTLE_RESERVE + one_send:
        if stop.wait(max(0.0, next_probe - clock())):
            return True
        next_probe = max(next_probe + o.idle_poll_seconds, clock())  # fixed rate; never a burst after a stall
        found = idle.probe(db, name, owner, o.sms_max_per_hour, o.voice_max_per_hour)
        if found.waiting:
            return True
        if found.superseded:
            _log.debug("dispatch: a newer invocation is waiting for work; this one returns")
            return False
    return False
