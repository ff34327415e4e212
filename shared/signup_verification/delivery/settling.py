"""Where a batch's outcomes are recorded: one interface, two ways.

    InlineSettler       on the dispatch loop's own connection, before the loop goes on;
    BackgroundSettler   on a second connection of the same invocation (DISPATCH_SETTLE_CONNECTION),
                        one settle in flight at a time, overlapping the next claim (PostgreSQL
                        works on both at once).
Either way the results are counted on the dispatch loop's thread: `settle` hands over a batch,
`wait` makes sure every batch handed over so far has been recorded (a failure raises there), and
`close` ends the settler without ever abandoning a settle mid-flight.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

from ..outbox import Settlement, heartbeats, transitions
from ..outbox.failure_policy import FailurePolicy
from ..platform.database import Database
from .sending import SendOutcome

_log = logging.getLogger("signup_verification.delivery.dispatcher")

# (the outcomes of one batch, intent id -> the status settle left for each that applied)
Record = Callable[[Sequence[SendOutcome], dict[int, str]], None]


class Settler(Protocol):
    def settle(self, outcomes: Sequence[SendOutcome], settlements: Sequence[Settlement]) -> None: ...

    def wait(self) -> bool:
        """Record every settle handed over; True if one was still in flight."""
        ...

    def close(self) -> None: ...


class InlineSettler:
    def __init__(self, db: Database, owner: str, record: Record, failures: FailurePolicy):
        self.db, self.owner, self.record, self.failures = db, owner, record, failures

    def settle(self, outcomes: Sequence[SendOutcome], settlements: Sequence[Settlement]) -> None:
        self.record(outcomes, transitions.settle(self.db, self.owner, settlements, self.failures))

    def wait(self) -> bool:
        return False

    def close(self) -> None:
        pass


class BackgroundSettler:
    def __init__(self, db: Database, owner: str, record: Record, failures: FailurePolicy):
        self.owner, self.record, self.failures = owner, record, failures
        self.db = db.sibling()
        heartbeats.use_custom_plans(self.db)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="settle")
        self._inflight: tuple[Sequence[SendOutcome], Future] | None = None

    def settle(self, outcomes: Sequence[SendOutcome], settlements: Sequence[Settlement]) -> None:
        self.wait()
        self._inflight = (
            outcomes,
            self._pool.submit(transitions.settle, self.db, self.owner, settlements, self.failures),
        )

    def wait(self) -> bool:
        if self._inflight is None:
            return False
        outcomes, future = self._inflight
        self._inflight = None
        self.record(outcomes, future.result())
        return True

    def close(self) -> None:
        try:
            self.wait()
        except Exception:  # already failing (the loop raised): the outcome is logged, the reconciler recovers
            _log.exception("settle failed while the invocation was ending")
        finally:
            self._pool.shutdown(wait=True)
            self.db.close()
