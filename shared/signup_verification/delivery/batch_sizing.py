"""How much one dispatch invocation may do: its share of the timeout, the measured send latency, and
the size of each batch.

The Deadline itself is platform/deadline.py (the reconciler's too). An invocation may run for
FUNCTION_TIMEOUT_SECONDS minus a safety margin (to settle, answer and log before the platform cuts
it off). Each batch is sized so its sends finish inside what is
left: `rounds` sequential sends per sender thread, from the measured recent send latency, times
the send concurrency. Every provider call is also bounded by the deadline itself, so a provider
that turns slow mid-batch costs a timeout, never an overrun.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..platform.deadline import Deadline

DEFAULT_LATENCY = 1.0  # seconds per send before anything was measured: cautious
SETTLE_RESERVE = 1.0  # seconds kept after the last send for the settle statement
MIN_LEASE_SECONDS = 30.0


def send_by(deadline: Deadline) -> float:
    """Sends must be over by this instant, leaving time to settle them (the dispatch loop and the
    sender threads share the invocation's Deadline)."""
    return deadline.at - SETTLE_RESERVE


def invocation_seconds(function_timeout: float, safety_margin: float) -> float:
    """The invocation's own budget; the margin never eats more than a quarter of a short timeout."""
    return function_timeout - min(safety_margin, function_timeout / 4)


@dataclass
class LatencyEstimator:
    """Recent send latency per channel: an exponentially weighted mean, thread-safe, seeded from
    the last invocation's figures (kept in worker_heartbeats) so a cold instance starts informed."""

    alpha: float = 0.2
    default: float = DEFAULT_LATENCY
    _means: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def seed(self, values: Mapping[str, float]) -> None:
        with self._lock:
            for channel, value in values.items():
                if channel not in self._means and isinstance(value, (int, float)) and value >= 0:
                    self._means[channel] = float(value)

    def observe(self, channel: str, seconds: float) -> None:
        with self._lock:
            mean = self._means.get(channel)
            self._means[channel] = seconds if mean is None else mean + self.alpha * (seconds - mean)

    def estimate(self, channel: str) -> float:
        return self._means.get(channel, self.default)

    def worst(self) -> float:
        """Batches mix channels, so they are sized for the slowest one (a channel never measured counts
        at the cautious default only while no channel has been measured at all)."""
        with self._lock:
            return max(self._means.values()) if self._means else self.default

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return {channel: round(value, 4) for channel, value in self._means.items()}


@dataclass(frozen=True)
class BatchPlan:
    size: int
    expected_seconds: float
    lease_seconds: float


def plan_batch(
    remaining: float, latency: float, concurrency: int, max_batch: int, batch_seconds: float
) -> BatchPlan | None:
    """The next batch, or None when not even one round of sends fits in what is left."""
    window = min(remaining - SETTLE_RESERVE, batch_seconds)
    per_send = max(latency * 1.25, 0.0001)  # a quarter for jitter
    if remaining - SETTLE_RESERVE < per_send:
        return None
    rounds = max(1, math.floor(window / per_send))
    size = max(1, min(max_batch, concurrency * rounds))
    expected = math.ceil(size / concurrency) * per_send
    # The lease outlives the expected batch twice over and is renewed while sends run long; its floor
    # bounds how soon the reconciler may take back the work of a worker that died.
    lease = max(MIN_LEASE_SECONDS, 2 * expected + SETTLE_RESERVE)
    return BatchPlan(size, expected, lease)
