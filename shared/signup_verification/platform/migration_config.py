"""The migration runner's settings and their parser, apart from the runner (migrations.py):
config/ builds them on every target (issue 18)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class MigrationConfig:
    """MIGRATIONS_DIR, MIGRATION_STATEMENT_TIMEOUT_MS, MIGRATION_LOCK_TIMEOUT_MS (README)."""

    directory: Path | None = None  # another folder of NNN_name.sql (+ definitions/) instead of the package's
    # Long enough for an index build, short enough that a stuck deploy ends.
    statement_timeout_ms: int = 600_000
    # A migration that waits for a lock queues every later query on that table behind it: fail fast
    # behind a long transaction instead, and let the deploy be retried.
    lock_timeout_ms: int = 5_000

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> MigrationConfig:
        return cls(
            directory=Path(env["MIGRATIONS_DIR"]) if env.get("MIGRATIONS_DIR") else None,
            statement_timeout_ms=_milliseconds(env, "MIGRATION_STATEMENT_TIMEOUT_MS", cls.statement_timeout_ms),
            lock_timeout_ms=_milliseconds(env, "MIGRATION_LOCK_TIMEOUT_MS", cls.lock_timeout_ms),
        )


def _milliseconds(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name) or ""
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{name} must be a positive integer (milliseconds), got {raw!r}")
    return int(raw)
