"""Cold start: functions/main.py installs a deferred structured handler, so
google-cloud-logging is not imported before the first answer; records logged meanwhile are held
with their request context and written, in order and redacted, once the real handler exists."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import time

import flask

from signup_verification.platform import log_handoff
from signup_verification.platform import logs as service_logging
from support.paths import ROOT

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
_log = logging.getLogger("signup_verification.test_handoff")


def _lines(stream: io.StringIO) -> list[dict]:
    parsed = [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]
    return [r for r in parsed if "logging.googleapis.com/diagnostic" not in r]


def test_importing_the_functions_module_does_not_import_cloud_logging(tmp_path):
    probe = (
        "import sys, main; "
        "print(int('google.cloud.logging_v2' in sys.modules)); "
        "main.service_logging.flush(); "
        "print(int('google.cloud.logging_v2' in sys.modules))"
    )
    env = {
        **os.environ,
        "LOG_FORMAT": "json",
        "ENVIRONMENT": "local",
        "FUNCTION_TARGET": "reconcile",
        "VERIFY_LOCAL_DIR": str(tmp_path),
        "PYTHONPATH": str(ROOT / "shared"),
    }
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT / "functions", env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-2:] == ["0", "1"]  # not at import; built when asked to write


def test_held_records_keep_their_request_trace_and_order_and_stay_redacted():
    stream = io.StringIO()
    handler = service_logging.configure(fmt="json", deployment="test", stream=stream, defer=True)
    try:
        assert isinstance(handler, log_handoff.DeferredHandler) and not handler.active
        app = flask.Flask("t")
        headers = {"traceparent": f"00-{TRACE_ID}-b7ad6b7169203331-01"}
        with app.test_request_context("/confirm?token=abc", method="POST", headers=headers):
            _log.info("first for ada@example.com")
            _log.warning("second", extra={"json_fields": {"event": "x", "n": 2}})
        assert stream.getvalue() == ""  # held: nothing written, the library not needed yet
        handler.activate()
        _log.info("third, after the switch")
        first, second, third = _lines(stream)
    finally:
        service_logging.remove()
    assert [first["message"], second["message"], third["message"]] == [
        "first for a***@example.com",
        "second",
        "third, after the switch",
    ]
    assert first["logging.googleapis.com/trace"] == TRACE_ID  # no project configured: the bare id
    assert first["logging.googleapis.com/spanId"] == "b7ad6b7169203331"
    assert first["logging.googleapis.com/trace_sampled"] is True
    assert first["httpRequest"]["requestUrl"] == "http://localhost/confirm?[redacted]"
    assert (second["severity"], second["event"], second["n"]) == ("WARNING", "x", 2)
    assert third["logging.googleapis.com/trace"] == ""  # logged outside any request


def test_the_first_response_starts_the_switch_in_the_background():
    stream = io.StringIO()
    handler = service_logging.configure(fmt="json", deployment="test", stream=stream, defer=True)
    try:
        _log.info("held until the first answer is out")
        service_logging.first_response_sent()
        deadline = time.monotonic() + 20
        while not handler.active and time.monotonic() < deadline:
            time.sleep(0.02)
        assert handler.active
        assert [r["message"] for r in _lines(stream)] == ["held until the first answer is out"]
    finally:
        service_logging.remove()


def test_x_cloud_trace_context_is_read_like_the_library_reads_it():
    assert log_handoff._trace_ids(None, f"{TRACE_ID}/1;o=1") == (TRACE_ID, "0000000000000001", True)
    assert log_handoff._trace_ids(None, TRACE_ID) == (TRACE_ID, None, False)
    assert log_handoff._trace_ids("garbage", None) == (None, None, False)
    assert log_handoff._trace_ids(f"00-{TRACE_ID}-b7ad6b7169203331-00", "other/2") == (
        TRACE_ID,
        "b7ad6b7169203331",
        False,
    )


def test_the_switch_happens_in_a_process_forked_after_configuring():
    """functions-framework imports main.py in gunicorn's master and forks the worker: the handler
    made before the fork must still switch in the worker (no thread from before the fork is relied on)."""
    read, write = os.pipe()
    stream = io.StringIO()
    handler = service_logging.configure(fmt="json", deployment="test", stream=stream, defer=True, level="INFO")
    try:
        pid = os.fork()
        if pid == 0:  # the worker
            try:
                _log.info("logged in the worker")
                service_logging.first_response_sent()
                deadline = time.monotonic() + 20
                while not handler.active and time.monotonic() < deadline:
                    time.sleep(0.02)
                os.write(write, json.dumps([r["message"] for r in _lines(stream)]).encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read) as answer:
            messages = json.loads(answer.read() or "null")
        os.waitpid(pid, 0)
    finally:
        service_logging.remove()
    assert messages == ["logged in the worker"]


def test_records_held_when_sigterm_ends_the_process_are_written():
    """Review: SIGTERM's grace timer ends the process with os._exit, which skips atexit: a fresh
    instance still holding records (the first 10 s) would lose them. The timer writes them first."""
    import signal

    instance = (
        "import logging, os, signal, sys, time\n"
        "from signup_verification.platform import logs, shutdown\n"
        "logs.configure(fmt='json', deployment='test', stream=sys.stdout, defer=True, level='INFO')\n"
        "shutdown.install(exit_after=0.2)\n"
        "logging.getLogger('signup_verification.instance').info('held when SIGTERM came')\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "time.sleep(30)\n"  # the grace timer ends the process long before this
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "shared")}
    out = subprocess.run([sys.executable, "-c", instance], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 128 + signal.SIGTERM, out.stderr
    assert "held when SIGTERM came" in out.stdout
