"""What the client-library tests share: a sleep that refuses to be called (a test that expects no
retry wait fails loudly on one) and a fresh address per test (the per-destination limits)."""

from __future__ import annotations

import uuid


def no_sleep(seconds: float) -> None:
    raise AssertionError(f"unexpected retry wait of {seconds} s")


def fresh_email() -> str:
    return f"ada.{uuid.uuid4().hex[:8]}@example.com"
