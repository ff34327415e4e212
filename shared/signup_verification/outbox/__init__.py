"""The transactional outbox: delivery intents, their leases and the append-only attempt log."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .policy import RetryPolicy

if TYPE_CHECKING:
    from .transitions import BegunAttempt, ClaimedIntent, Settlement

__all__ = ["RetryPolicy", "ClaimedIntent", "BegunAttempt", "Settlement"]


def __getattr__(name: str) -> Any:
    """The transitions on first use: config/ reads outbox.policy at every target's start (issue 18)."""
    if name in ("BegunAttempt", "ClaimedIntent", "Settlement"):
        from . import transitions

        return getattr(transitions, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
