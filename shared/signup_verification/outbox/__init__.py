"""The transactional outbox: delivery intents, their leases and the append-only attempt log."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .transitions import BegunAttempt, ClaimedIntent, Settlement

__all__ = ["ClaimedIntent", "BegunAttempt", "Settlement"]


def __getattr__(name: str) -> Any:
    """The transitions' types on first use: every target imports outbox.config at start, which must
    not load the transitions."""
    if name in ("BegunAttempt", "ClaimedIntent", "Settlement"):
        from . import transitions

        return getattr(transitions, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
