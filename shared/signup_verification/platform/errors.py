"""The one error a bad setting raises: its message names the variable (config/ collects them)."""

from __future__ import annotations


class ConfigError(ValueError):
    """A setting is missing or malformed; the message names the variable (or lists each one)."""

    def __init__(self, message: str, problems: tuple[str, ...] = ()):
        super().__init__(message)
        self.problems = problems or (message,)
