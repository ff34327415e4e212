"""The transactional outbox: delivery intents, their leases and the append-only attempt log."""

from .policy import RetryPolicy
from .transitions import BegunAttempt, ClaimedIntent, Settlement

__all__ = ["RetryPolicy", "ClaimedIntent", "BegunAttempt", "Settlement"]
