"""The time budget of one invocation: a monotonic instant that dispatcher and reconciler both watch.

Cloud Functions answers 504 at its timeout but keeps the instance running, so work must stop by
itself before then; SIGTERM may move the instant closer (`shorten`).
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Deadline:
    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.started = clock()
        self.at = self.started + seconds

    @classmethod
    def within(
        cls, timeout_seconds: float, margin_seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> Deadline:
        """The function's timeout less a margin kept free at the end (at least one second)."""
        return cls(max(timeout_seconds - margin_seconds, 1.0), clock)

    def remaining(self) -> float:
        return self.at - self.clock()

    def exhausted(self) -> bool:
        return self.clock() >= self.at

    def shorten(self, seconds_from_now: float) -> None:
        self.at = min(self.at, self.clock() + seconds_from_now)
