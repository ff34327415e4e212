"""Create nudges dispatch: a committed verification starts a dispatch invocation within about
DISPATCH_NUDGE_SECONDS, without an invocation kept open for it (infra's small tier).

Time is cut into buckets of DISPATCH_NUDGE_SECONDS. The first create of a bucket enqueues ONE named
task, `nudge-<hash>-<bucket>`, scheduled at the bucket's end; Cloud Tasks refuses a second task of
that name (and the local stand-in does the same), so concurrent creates on any number of instances
make one, and each instance asks at most once per bucket. A create computes its bucket after its
transaction committed, so the task of its bucket runs after its intent is there to claim: no create
is left behind by a task that ran too early, and a create that rolled back (refused, replayed, a
mismatched key: nothing new to send) sends none.

The nudge goes out beside the answer, never in its way: the platform seam (platform/tasks.py) sends
it on a background thread and logs a failure instead of raising it. A nudge that is lost (Cloud Tasks
unreachable, the instance's CPU throttled before the request left) leaves the message to the
scheduler's next tick, which stays the backbone. The invocation it starts is an ordinary dispatch
run under the same leases and fan-out bounds (api/dispatch.py: the nudge path, its own caller
identity; on an empty outbox one probe and no write).
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections.abc import Callable
from functools import lru_cache

from ..platform.tasks import CloudTasks, LocalTasks, TaskStarter
from .config import NudgeConfig

NUDGE = "nudge"
QUEUE_BOUND = 1  # the local stand-in runs one nudged invocation at a time (infra's nudge queue does too)
# How long the task waits for its invocation's answer: the most Cloud Tasks allows, beyond any dispatch
# timeout (infra validates dispatch's at most 110 s), so a long run is never retried while it runs.
ANSWER_WAIT_SECONDS = 1800


def bucket_of(now: float, seconds: float) -> int:
    return math.floor(now / seconds)


def task_name(bucket: int) -> str:
    """The bucket's task id. A short hash in front spreads the names over Cloud Tasks' key space
    (sequential names are its documented hot spot); the bucket after it keeps them unique."""
    return f"nudge-{hashlib.sha256(str(bucket).encode()).hexdigest()[:8]}-{bucket}"


def task_body(bucket: int) -> bytes:
    return json.dumps({NUDGE: {"bucket": bucket}}).encode()


class Nudger:
    """One instance's nudges: at most one task per bucket, enqueued through the platform seam."""

    def __init__(self, starter: TaskStarter, seconds: float, clock: Callable[[], float] = time.time):
        self.starter, self.seconds, self.clock = starter, seconds, clock
        self._last: int | None = None
        self._lock = threading.Lock()

    def nudge(self) -> bool:
        """Enqueue this bucket's task unless this instance did already; True if it asked."""
        bucket = bucket_of(self.clock(), self.seconds)
        with self._lock:
            if bucket == self._last:
                return False
            self._last = bucket
        self.starter.enqueue(task_body(bucket), task_name(bucket), (bucket + 1) * self.seconds)
        return True


@lru_cache(maxsize=4)
def nudger(config: NudgeConfig) -> Nudger | None:
    """The instance's nudger (built once per process): Cloud Tasks with a queue, else the local
    stand-in POSTing to DISPATCH_NUDGE_URL; None when nudging is off."""
    if not config.enabled or not config.url:
        return None
    if config.queue:
        starter: TaskStarter = CloudTasks(
            config.queue, config.url, config.service_account or "", ANSWER_WAIT_SECONDS, api=config.api_url
        )
    else:
        starter = LocalTasks(config.url, QUEUE_BOUND, ANSWER_WAIT_SECONDS)
    return Nudger(starter, config.seconds)


def after_commit(config: NudgeConfig) -> None:
    """A verification was created and committed: nudge dispatch (a no-op when nudging is off)."""
    found = nudger(config)
    if found is not None:
        found.nudge()
