"""One dispatch run, closed as a reconcile run is (operations/reconciler/runner.py): the invocation
itself (delivery/dispatcher.py), then the deployment's heartbeat (its last completed run, which
`verifyctl status` shows) and one `event="signals"` record per channel (the absence alert reads
them). Once shutdown began (SIGTERM) the channel adapters are closed (SMTP says QUIT); otherwise
the next invocation reuses their connections.

An invocation the scheduler or a create's nudge started may start more (delivery/fanout.py) through
`tasks`, the platform seam (platform/tasks.py); without one, the instance's own is built from
DISPATCH_FANOUT_* (none when fan-out is off). A fan-out invocation (`invocation`, from its task's
body) starts none; one whose slot it cannot claim raises fanout.SlotNotClaimed before anything ran,
and writes no heartbeat and no signals either. A nudged invocation first asks whether a claim would
find anything (one probe of the eligible index, outbox/idle.py): on an empty outbox it answers an
empty report and writes nothing, so a nudge that came late, twice or from a forger costs one read."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from ..delivery import dispatcher, fanout
from ..delivery.channels.base import Channel
from ..delivery.dispatch_config import DispatchConfig
from ..outbox import heartbeats, idle
from ..outbox.config import RetryPolicy
from ..platform.database import Database
from ..platform.tasks import TaskStarter
from ..verifications.tokens import Keyring
from . import signals
from .config import SignalsConfig


def run(
    db: Database,
    config: DispatchConfig,
    retry: RetryPolicy,
    signals_config: SignalsConfig,
    keyring: Keyring,
    channels: Mapping[str, Channel],
    *,
    stop: threading.Event,
    close_channels: Callable[[], None],
    fault: dispatcher.FaultHook | None = None,
    invocation: fanout.Invocation | None = None,
    tasks: TaskStarter | None = None,
) -> dispatcher.DispatchReport:
    invocation = invocation or fanout.Invocation()
    if invocation.role == fanout.NUDGE and not idle.work_waiting(db, config.sms_max_per_hour):
        return dispatcher.DispatchReport()
    if tasks is None and invocation.role in fanout.DECIDING:
        tasks = fanout.starter(config.fanout, config.function_timeout_seconds)
    try:
        report = dispatcher.dispatch(
            db, config, retry, keyring, channels, stop=stop, fault=fault, invocation=invocation, tasks=tasks
        )
    finally:
        if stop.is_set():
            close_channels()
    heartbeats.complete_dispatch(db, config.deployment)
    signals.emit(db, config.deployment, source="dispatch", config=signals_config, moved=report.moved)
    return report
