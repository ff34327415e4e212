"""Cloud Logging's structured output captured in memory: the seam filled with a local stand-in."""

from __future__ import annotations

import io
import json

import pytest

from signup_verification.platform import logs as service_logging


class LogLines:
    """The seam filled with a local stand-in: every line the structured handler writes."""

    def __init__(self) -> None:
        self.stream = io.StringIO()

    def text(self) -> str:
        service_logging.flush()  # functions/main.py defers the structured handler: write what it holds
        return self.stream.getvalue()

    def records(self) -> list[dict]:
        """Our records (the client library's one-time diagnostic line left out)."""
        parsed = [json.loads(line) for line in self.text().splitlines() if line.strip()]
        return [r for r in parsed if "logging.googleapis.com/diagnostic" not in r]

    def events(self, event: str) -> list[dict]:
        return [r for r in self.records() if r.get("event") == event]


@pytest.fixture
def log_lines():
    """Cloud Logging's structured JSON, captured: configure() as on Cloud Run, into a buffer."""
    lines = LogLines()
    with service_logging.use_sink(lines.stream):
        service_logging.configure(fmt="json", deployment="test")
        yield lines
    service_logging.remove()
