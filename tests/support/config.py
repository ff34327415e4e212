"""Configs for tests, built by the real loader: `make_config(send_concurrency=2)` is what
`SEND_CONCURRENCY=2` in the environment gives (names are the variables', lower-cased)."""

from __future__ import annotations

from typing import Any

from signup_verification.config import Config, load

ALIASES = {"local_dir": "VERIFY_LOCAL_DIR", "statement_timeout_ms": "DATABASE_STATEMENT_TIMEOUT_MS"}


def environment(**settings: Any) -> dict[str, str]:
    return {ALIASES.get(name, name.upper()): str(value) for name, value in settings.items() if value is not None}


def make_config(**settings: Any) -> Config:
    """Only what is passed, never the process environment."""
    return load(environment(**settings))


class RecordingEnv(dict[str, str]):
    """An environment that remembers every variable the loader asked for (`asked`)."""

    def __init__(self, env: dict[str, str]):
        super().__init__(env)
        self.asked: set[str] = set()

    def get(self, name, default=None):
        self.asked.add(name)
        return super().get(name, default)
