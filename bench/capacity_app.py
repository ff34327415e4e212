"""The capacity benchmark's function source: the real create and confirm targets of functions/main.py,
and, with BENCH_POOL_SIZE, the instance's request threads sharing that many connections statement by
statement (a transaction for its whole block) instead of one connection per thread: the per-instance
pool bench/capacity_bench.py measures beside the shipped shapes. It stays here, in the bench: it did
not pay (docs/benchmarks.md, "Requests per database connection and per vCPU").
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "functions"), str(ROOT / "shared")]

import main  # noqa: E402  (functions/main.py)
from signup_verification import runtime  # noqa: E402
from signup_verification.platform import cloudsql  # noqa: E402
from signup_verification.platform.database import Database  # noqa: E402


class Pooled(Database):
    """At most `size` connections, taken in turns by the threads for one statement (or transaction) each."""

    def __init__(self, size: int, make):  # the pool's connections are the Databases: nothing of its own to open
        self.size, self._make = size, make
        self._free: list[Database] = []
        self._made = 0
        self._available = threading.Condition()

    @contextmanager
    def _connection(self) -> Iterator[Database]:  # type: ignore[override]
        with self._available:
            while not self._free and self._made >= self.size:
                self._available.wait()
            db = self._free.pop() if self._free else None
            if db is None:
                self._made += 1
        db = db or self._make()
        try:
            yield db
        finally:
            with self._available:
                self._free.append(db)
                self._available.notify()

    def run(self, sql: str, **params: Any) -> list[list[Any]]:
        with self._connection() as db:
            return db.run(sql, **params)

    def rows(self, sql: str, **params: Any) -> list[dict[str, Any]]:
        with self._connection() as db:
            return db.rows(sql, **params)

    @contextmanager
    def transaction(self) -> Iterator[Database]:
        with self._connection() as db, db.transaction() as tx:
            yield tx


def _pooled_runtime(size: int) -> None:
    instance = runtime.get_runtime()
    config = instance.config
    settings = runtime.session_settings(config)

    def make() -> Database:
        return Database(
            runtime.database_params(config.database),
            application_name=instance.application_name,
            statement_timeout_ms=config.database.statement_timeout_ms,
            connector=cloudsql.connector_for(config.database, instance.application_name, settings),
            session_settings=settings,
        )

    shared = Pooled(size, make)
    runtime.Runtime.db = property(lambda self: shared)  # type: ignore[method-assign, assignment]


if os.environ.get("BENCH_POOL_SIZE"):
    _pooled_runtime(int(os.environ["BENCH_POOL_SIZE"]))

create_verification = main.create_verification
confirm_verification = main.confirm_verification
