"""Delivery: the dispatcher, sending, rendering, MIME, SMS encoding, templates and channel adapters."""
