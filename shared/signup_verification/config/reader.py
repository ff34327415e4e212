"""The environment as the configuration reads it: `sm://` references resolved, typed getters, and every
bad setting collected (load raises them together) instead of stopping at the first."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from ..platform import secret_manager as secrets
from ..platform.errors import ConfigError

T = TypeVar("T")


class Reader:
    """The environment with `sm://` references resolved, and the errors found so far."""

    def __init__(self, env: Mapping[str, str]):
        self.errors: list[str] = []
        self.env: dict[str, str] = {}
        for name, value in env.items():  # an unreadable reference counts as unset: one error, not two
            self.env[name] = self.attempt(functools.partial(secrets.resolve, name, value), "")

    def attempt(self, build: Callable[[], T], fallback: T) -> T:
        """build(), or `fallback` with its ConfigError recorded (so the others are still checked)."""
        try:
            return build()
        except ConfigError as exc:
            self.errors.extend(exc.problems)
            return fallback

    def fail(self, message: str) -> None:
        self.errors.append(message)

    def text(self, name: str) -> str | None:
        return self.env.get(name) or None

    def integer(self, name: str, default: int, minimum: int = 0) -> int:
        raw = self.env.get(name)
        if raw is None or raw == "":
            return default
        try:
            value = int(raw)
        except ValueError:
            self.fail(f"{name} must be an integer, got {raw!r}")
            return default
        if value < minimum:
            self.fail(f"{name} must be >= {minimum}, got {value}")
            return default
        return value

    def number(self, name: str, default: float, minimum: float = float("-inf")) -> float:
        raw = self.env.get(name)
        if raw is None or raw == "":
            return default
        try:
            value = float(raw)
        except ValueError:
            self.fail(f"{name} must be a number, got {raw!r}")
            return default
        if value < minimum:
            self.fail(f"{name} must be >= {minimum:g}, got {raw}")
            return default
        return value

    def positive(self, name: str, default: float) -> float:
        value = self.number(name, default)
        if value <= 0:
            self.fail(f"{name} must be > 0, got {value:g}")
            return default
        return value

    def flag(self, name: str, default: bool) -> bool:
        raw = (self.env.get(name) or "").strip().lower()
        if not raw:
            return default
        if raw in {"1", "true", "yes", "on"}:
            return True
        if raw in {"0", "false", "no", "off"}:
            return False
        self.fail(f"{name} must be true or false, got {raw!r}")
        return default

    def file(self, name: str) -> str | None:
        path = self.text(name)
        if path is not None and not Path(path).is_file():
            self.fail(f"{name} must name a readable file, got {path!r}")
            return None
        return path

    def choice(self, name: str, default: str, choices: set[str]) -> str:
        value = self.env.get(name) or default
        if value not in choices:
            self.fail(f"{name} must be one of {sorted(choices)}, got {value!r}")
            return default
        return value
