"""An idle tick is quiet: DEBUG records, hidden in text below LOG_LEVEL=DEBUG, still written in JSON
(operators read dispatch_summary there; the metrics count every signals record)."""

from __future__ import annotations

import io
import json
import logging

import pytest

from signup_verification.platform import logs

_dispatcher = logging.getLogger("signup_verification.delivery.dispatcher")
IDLE = {
    "event": "dispatch_summary",
    "claimed": 0,
    "accepted": 0,
    "stale_writes": 0,
    "elapsed_ms": 12,
    "lease_owner": "local:x",
    "send_latency_seconds": {},
}
BUSY = {**IDLE, "claimed": 2, "accepted": 2}
IDLE_RECONCILE = {
    "event": "reconcile",
    "claims_expired": 0,
    "overdue_count": 0,
    "drained": True,
    "backlog": [],
    "elapsed_ms": 30,
    "watermark_covered_through": "2026-12-01T10:00:00+00:00",
}


@pytest.fixture
def restore_logging():
    yield
    logs.remove()
    logging.getLogger().setLevel(logging.WARNING)
    logging.getLogger(logs.SIGNALS_LOGGER).setLevel(logging.NOTSET)


def _log(fields: dict, fmt: str, level: str = "INFO") -> str:
    out = io.StringIO()
    logs.configure(fmt=fmt, level=level, stream=out, deployment="test")
    _dispatcher.info("dispatch: summary", extra={"json_fields": fields})
    return out.getvalue()


def test_idle_runs_are_recognised():
    assert logs.idle_run(IDLE) and logs.idle_run(IDLE_RECONCILE)
    assert not logs.idle_run(BUSY)
    assert not logs.idle_run({**IDLE_RECONCILE, "backlog": ["redact"]})
    assert not logs.idle_run({**IDLE_RECONCILE, "drained": False})
    assert not logs.idle_run({"event": "send_outcome", "claimed": 0})


def test_text_hides_an_idle_run_unless_debug(restore_logging):
    assert _log(IDLE, "text") == ""
    assert "DEBUG   signup_verification.delivery.dispatcher: dispatch: summary" in _log(IDLE, "text", "DEBUG")
    assert "INFO    signup_verification.delivery.dispatcher" in _log(BUSY, "text")


def test_json_keeps_an_idle_run_at_debug_severity(restore_logging):
    [record] = [r for r in map(json.loads, _log(IDLE, "json").splitlines()) if "event" in r]
    assert record["severity"] == "DEBUG" and record["event"] == "dispatch_summary"
    [busy] = [r for r in map(json.loads, _log(BUSY, "json").splitlines()) if "event" in r]
    assert busy["severity"] == "INFO"


def test_json_writes_idle_signals_records_whatever_the_level(restore_logging):
    out = io.StringIO()
    logs.configure(fmt="json", level="INFO", stream=out, deployment="test")
    logging.getLogger(logs.SIGNALS_LOGGER).debug("signals email: idle", extra={"json_fields": {"event": "signals"}})
    [record] = [r for r in map(json.loads, out.getvalue().splitlines()) if "event" in r]
    assert record["event"] == "signals" and record["severity"] == "DEBUG"
