"""Delivery: what the dispatcher (operations/dispatcher.py) drives: sending, pacing, fan-out,
rendering, MIME, SMS encoding, templates and channel adapters."""
