"""Provider pacing: sends per second within what each provider accepts, and a slow-down when it
says it is overwhelmed.

Per channel, token buckets the sender threads draw from before each provider call:
    email   EMAIL_MAX_PER_SECOND requests
    sms     SMS_MAX_PER_SECOND requests, and TWILIO_SENDER_MPS message segments (Twilio queues each
            sender's messages at its MPS: a code queued there behind a backlog arrives late, so the
            backlog stays here, where the dead-link check drops what expired, never sent)
    whatsapp WHATSAPP_MAX_PER_SECOND requests (Meta's throughput of the business number)
    voice   VOICE_CALLS_PER_SECOND calls (Twilio's calls per second of the account)
Each bucket holds BURST_SECONDS of its rate. An invocation takes 1/n of every rate when n
invocations share the deployment's (the fan-out's, delivery/fanout.py). A draw returns how long
to wait for the turn; a send whose turn comes too late for this invocation is given back unsent.

A 429 (or Twilio's 20429) slows the whole channel: its Retry-After (SLOW_DOWN_DEFAULT_SECONDS when
there is none, at most SLOW_DOWN_MAX_SECONDS) pauses this invocation's sends of the channel at once
and, written to channel_pacing by the dispatch loop, every invocation's claim of it
(outbox/queries/claim.sql:claim). The rate-limited send was never processed, so it does not spend an attempt.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..platform.catalogue import catalogue
from ..platform.channels import DELIVERY_CHANNELS, MESSAGE_CHANNELS
from ..platform.database import Database
from .capacity_config import PacingConfig

_SQL = catalogue("delivery")
_PACING_SLOW_DOWN = _SQL["pacing_slow_down"]

BURST_SECONDS = 2.0
SLOW_DOWN_DEFAULT_SECONDS = 1.0
SLOW_DOWN_MAX_SECONDS = 300.0
REQUESTS, SEGMENTS = "requests", "segments"


def slow_down_seconds(retry_after: float | None) -> float:
    """How long a 429 pauses its channel: the provider's wait, within bounds."""
    wait = SLOW_DOWN_DEFAULT_SECONDS if retry_after is None else retry_after
    return min(max(wait, SLOW_DOWN_DEFAULT_SECONDS), SLOW_DOWN_MAX_SECONDS)


@dataclass
class Bucket:
    limit: float  # the deployment's rate (units per second)
    unit: str  # REQUESTS or SEGMENTS
    share: int = 1  # invocations sharing it
    tokens: float = field(init=False)
    at: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        self.tokens = self.capacity

    @property
    def rate(self) -> float:
        return self.limit / self.share

    @property
    def capacity(self) -> float:
        return max(1.0, self.rate * BURST_SECONDS)

    def take(self, cost: float, now: float) -> float:
        """Reserve `cost`; seconds until it is covered (the reservation stands meanwhile)."""
        self.tokens = min(self.capacity, self.tokens + (now - self.at) * self.rate) if self.at else self.tokens
        self.at = now
        self.tokens -= cost
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate


@dataclass(frozen=True)
class Permit:
    channel: str
    wait: float  # seconds until this send may start
    paused: bool = False  # the channel is slowed down: the send must not start in this batch
    costs: tuple[tuple[Bucket, float], ...] = ()


class Pacer:
    """Shared by an invocation's sender threads; the dispatch loop publishes its slow-downs."""

    def __init__(self, buckets: Mapping[str, list[Bucket]], clock: Callable[[], float] = time.monotonic):
        self._buckets = {channel: list(found) for channel, found in buckets.items()}
        self.clock = clock
        self._lock = threading.Lock()
        self._paused_until: dict[str, float] = {}
        self._unpublished: dict[str, tuple[float, str]] = {}  # channel -> (seconds, reason)

    def share(self, invocations: int) -> None:
        """n invocations send at once: each takes 1/n of every rate."""
        with self._lock:
            for found in self._buckets.values():
                for bucket in found:
                    bucket.share = max(1, invocations)
                    bucket.tokens = min(bucket.tokens, bucket.capacity)

    def rate(self, channel: str) -> float | None:
        """Messages per second this invocation may start (a message is at least one segment)."""
        with self._lock:
            rates = [b.rate for b in self._buckets.get(channel, [])]
        return min(rates) if rates else None

    def permit(self, channel: str, segments: int = 1) -> Permit:
        now = self.clock()
        with self._lock:
            left = self._paused_until.get(channel, 0.0) - now
            if left > 0:
                return Permit(channel, left, paused=True)
            costs = tuple((b, float(segments if b.unit == SEGMENTS else 1)) for b in self._buckets.get(channel, []))
            wait = max((b.take(cost, now) for b, cost in costs), default=0.0)
        return Permit(channel, wait, costs=costs)

    def cancel(self, permit: Permit) -> None:
        """A permit not used: its tokens go back."""
        with self._lock:
            for bucket, cost in permit.costs:
                bucket.tokens = min(bucket.capacity, bucket.tokens + cost)

    def slow_down(self, channel: str, retry_after: float | None, reason: str) -> float:
        """The provider said 429: pause the channel here; the loop publishes it. Returns the pause."""
        seconds = slow_down_seconds(retry_after)
        with self._lock:
            until = self.clock() + seconds
            if until > self._paused_until.get(channel, 0.0):
                self._paused_until[channel] = until
                self._unpublished[channel] = (seconds, reason)
        return seconds

    def paused(self, channel: str) -> float:
        with self._lock:
            return max(0.0, self._paused_until.get(channel, 0.0) - self.clock())

    def unpublished(self) -> dict[str, tuple[float, str]]:
        """Slow-downs not yet written for the other invocations (taken: each is written once)."""
        with self._lock:
            found, self._unpublished = self._unpublished, {}
        return found


def from_config(config: PacingConfig, clock: Callable[[], float] = time.monotonic) -> Pacer:
    buckets: dict[str, list[Bucket]] = {channel: [] for channel in DELIVERY_CHANNELS}
    for channel in MESSAGE_CHANNELS:
        limit = config.requests_per_second(channel)
        if limit is not None and math.isfinite(limit):
            buckets[channel].append(Bucket(limit, REQUESTS))
    if config.twilio_sender_mps is not None:
        buckets["sms"].append(Bucket(config.twilio_sender_mps, SEGMENTS))
    return Pacer(buckets, clock)


def publish(db: Database, slowdowns: Mapping[str, tuple[float, str]]) -> None:
    """Write slow-downs to channel_pacing: every invocation's claim leaves the channel until then."""
    if not slowdowns:
        return
    channels = list(slowdowns)
    db.run(
        _PACING_SLOW_DOWN,
        channels=channels,
        seconds=[slowdowns[c][0] for c in channels],
        reasons=[slowdowns[c][1][:200] for c in channels],
    )
