"""Waiting for a condition instead of sleeping on it: poll until it holds, or fail at a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def until(condition: Callable[[], T], timeout: float = 10.0, interval: float = 0.02, what: str = "") -> T:
    """`condition()`'s first truthy answer, asked every `interval` seconds; an AssertionError naming
    `what` when `timeout` seconds pass without one."""
    deadline = time.monotonic() + timeout
    while True:
        answer = condition()
        if answer:
            return answer
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout} s: {what or condition}")
        time.sleep(interval)
