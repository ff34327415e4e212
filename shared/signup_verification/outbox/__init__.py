"""The transactional outbox: delivery intents, their leases and the append-only attempt log."""
