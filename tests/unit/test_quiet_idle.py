"""An idle tick is quiet: a run that moved nothing logs its summary at DEBUG (the emitter chooses
its level), hidden in text below LOG_LEVEL=DEBUG and still written in JSON (operators read
dispatch_summary there; the metrics count every signals record). Tested through the real emitters:
a dispatch run with nothing to do and one that delivered."""

from __future__ import annotations

import io
import json
import logging
from types import SimpleNamespace

import pytest

from signup_verification.operations.dispatcher import Dispatcher
from signup_verification.platform import logs


@pytest.fixture
def restore_logging():
    yield
    logs.remove()
    logging.getLogger().setLevel(logging.WARNING)
    for name in logs.RUN_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET)


def _summary(claimed: int, fmt: str, level: str = "INFO") -> str:
    """What the dispatcher's own summary writes for a run that claimed `claimed` intents."""
    out = io.StringIO()
    logs.configure(fmt=fmt, level=level, stream=out, deployment="test")
    run = Dispatcher.__new__(Dispatcher)  # the summary needs only its report and bookkeeping
    from signup_verification.delivery.batch_sizing import LatencyEstimator
    from signup_verification.delivery.fanout import Invocation
    from signup_verification.operations.config import DispatchConfig
    from signup_verification.operations.dispatcher import DispatchReport

    run.config, run.owner, run.abandoned, run.estimator = DispatchConfig(), "test:x", 0, LatencyEstimator()
    run.invocation, run.fanout = Invocation(), SimpleNamespace(started=0)
    run.report = DispatchReport(claimed=claimed, accepted=claimed)
    run._log_summary()
    return out.getvalue()


def test_text_hides_an_idle_run_unless_debug(restore_logging):
    assert _summary(0, "text") == ""
    assert "DEBUG   signup_verification.operations.dispatcher: dispatch: claimed=0" in _summary(0, "text", "DEBUG")
    assert "INFO    signup_verification.operations.dispatcher" in _summary(2, "text")


def test_json_keeps_an_idle_run_at_debug_severity(restore_logging):
    [record] = [r for r in map(json.loads, _summary(0, "json").splitlines()) if "event" in r]
    assert record["severity"] == "DEBUG" and record["event"] == "dispatch_summary"
    [busy] = [r for r in map(json.loads, _summary(2, "json").splitlines()) if "event" in r]
    assert busy["severity"] == "INFO"


def test_json_writes_idle_signals_records_whatever_the_level(restore_logging):
    out = io.StringIO()
    logs.configure(fmt="json", level="INFO", stream=out, deployment="test")
    logging.getLogger(logs.SIGNALS_LOGGER).debug("signals email: idle", extra={"json_fields": {"event": "signals"}})
    [record] = [r for r in map(json.loads, out.getvalue().splitlines()) if "event" in r]
    assert record["event"] == "signals" and record["severity"] == "DEBUG"
