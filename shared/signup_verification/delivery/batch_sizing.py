"""How much one dispatch invocation may do: its share of the timeout, the measured send latency, and
the size of each batch and of its sends in flight, per channel.

The Deadline itself is platform/deadline.py (the reconciler's too). An invocation may run for
FUNCTION_TIMEOUT_SECONDS minus a safety margin (to settle, answer and log before the platform cuts
it off). Each batch is sized so its sends finish inside what is left, channel by channel: `rounds`
sequential sends per sender thread from the channel's measured recent latency, times its most sends
in flight (SEND_CONCURRENCY_MAX_<CHANNEL>), and no more than this invocation's share of the
provider's rate allows in that time. A claimed batch then runs as many sends at once as it holds,
up to that maximum (and to what the rate can use): a small batch is sent all at once, a full one
with every sender. Every provider call is also bounded by the deadline itself, so a provider that
turns slow mid-batch costs a timeout, never an overrun.
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
JITTER = 1.25  # a send is planned at 1.25 times the measured mean


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
        """The slowest channel measured (the cautious default while none has been)."""
        with self._lock:
            return max(self._means.values()) if self._means else self.default

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return {channel: round(value, 4) for channel, value in self._means.items()}


@dataclass(frozen=True)
class ChannelBudget:
    """What one channel's sends cost an invocation now."""

    concurrency: int  # the most sends in flight (SEND_CONCURRENCY_MAX_<CHANNEL>)
    per_send: float  # seconds one send is planned to take (measured mean, jitter included)
    rate: float | None = None  # sends per second this invocation may start (its share of the provider's)

    def inflight(self, count: int) -> int:
        """Sends at once for `count` claimed intents: all of them up to the maximum, and no more
        than the rate can keep busy (a paced sender would only wait for its turn)."""
        paced = self.concurrency if self.rate is None else max(1, math.ceil(self.rate * self.per_send) + 1)
        return max(1, min(self.concurrency, count, paced))

    def seconds(self, count: int) -> float:
        """How long `count` sends take with `inflight(count)` at once, at most the rate allows."""
        if count <= 0:
            return 0.0
        waves = math.ceil(count / self.inflight(count)) * self.per_send
        return max(waves, count / self.rate) if self.rate else waves

    def capacity(self) -> float:
        """Sends per second with every sender busy (the fan-out's measure of one invocation)."""
        busy = self.concurrency / self.per_send
        return min(busy, self.rate) if self.rate else busy


def budget(latency: float, concurrency: int, rate: float | None = None) -> ChannelBudget:
    return ChannelBudget(max(1, concurrency), max(latency * JITTER, 0.0001), rate)


@dataclass(frozen=True)
class BatchPlan:
    size: int  # the claim's limit over all channels
    limits: Mapping[str, int]  # the claim's limit per channel (0: none of its intents this time)
    expected_seconds: float  # the batch's sends, were every limit filled
    lease_seconds: float


def lease_for(expected_seconds: float) -> float:
    """The lease outlives the expected batch twice over and is renewed while sends run long; its floor
    bounds how soon the reconciler may take back the work of a worker that died."""
    return max(MIN_LEASE_SECONDS, 2 * expected_seconds + SETTLE_RESERVE)


def plan_batch(
    remaining: float, budgets: Mapping[str, ChannelBudget], max_batch: int, batch_seconds: float
) -> BatchPlan | None:
    """The next batch, or None when not one send of any channel fits in what is left."""
    room = remaining - SETTLE_RESERVE
    window = min(room, batch_seconds)
    limits: dict[str, int] = {}
    for channel, b in budgets.items():
        if room < b.per_send:
            limits[channel] = 0
            continue
        rounds = max(1, math.floor(window / b.per_send))
        limit = b.concurrency * rounds
        if b.rate is not None:
            limit = min(limit, max(1, math.floor(b.rate * max(window, b.per_send))))
        limits[channel] = min(limit, max_batch)
    size = min(max_batch, sum(limits.values()))
    if size <= 0:
        return None
    expected = max(b.seconds(limits[c]) for c, b in budgets.items())
    return BatchPlan(size, limits, expected, lease_for(expected))


def batch_seconds_of(counts: Mapping[str, int], budgets: Mapping[str, ChannelBudget]) -> float:
    """How long a claimed batch's sends take: its slowest channel."""
    return max((budgets[c].seconds(n) for c, n in counts.items() if c in budgets), default=0.0)
