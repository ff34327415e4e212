"""Cloud Logging's handler off the first answer's path (cold start).

Importing google-cloud-logging costs ~0.3 s of CPU, most of a function's cold start. A deployed
instance therefore starts with a DeferredHandler: records are filtered (redacted) and given their
request context (URL without query, trace and span ids) when they are logged, and held; the real
StructuredLogHandler is built in a background thread once the first response has been sent (or
`max_defer_seconds` after the first held record, for a first request that runs long such as
dispatch), and the held records are written through it in order. At exit, or when too many records
are held, it is built at once. Nothing is dropped; the lines only come out a little later.

    handler = DeferredHandler(build_real, project_id)   # build_real() -> the StructuredLogHandler
    handler.first_response_sent()                         # main.py: after the first answer went out
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import threading
from collections.abc import Callable

from . import shutdown

_TRACEPARENT = re.compile(
    r"^\s?(?!ff)[a-f\d]{2}-((?![0]{32})[a-f\d]{32})-((?![0]{16})[a-f\d]{16})-([a-f\d]{2})(-.*)?\s?$"
)
_XCLOUD = re.compile(r"([\w-]+)?(\/?([\w-]+))?(;?o=(\d))?")
MAX_HELD = 5_000  # past this many held records the real handler is built on the logging thread


def request_context(project_id: str | None) -> dict[str, object] | None:
    """The record attributes google-cloud-logging's CloudLoggingFilter would infer from the current
    Flask request (it honours ones already set), or None outside a request."""
    try:
        import flask
    except ImportError:
        return None
    if not flask.has_request_context():
        return None
    request = flask.request
    context: dict[str, object] = {
        "http_request": {
            "requestMethod": request.method,
            "requestUrl": request.url,
            "userAgent": request.user_agent.string,
            "protocol": request.environ.get("SERVER_PROTOCOL"),
        }
    }
    trace, span, sampled = _trace_ids(request.headers.get("traceparent"), request.headers.get("X-Cloud-Trace-Context"))
    if trace:
        context["trace"] = f"projects/{project_id}/traces/{trace}" if project_id else trace
        context["span_id"] = span
        context["trace_sampled"] = sampled
    return context


def _trace_ids(traceparent: str | None, xcloud: str | None) -> tuple[str | None, str | None, bool]:
    """The same parse as the library's _helpers (W3C traceparent first, then X-Cloud-Trace-Context)."""
    m = _TRACEPARENT.match(traceparent) if traceparent else None
    if m:
        return m.group(1), m.group(2), bool(int(m.group(3), 16) & 1)
    m = _XCLOUD.match(xcloud) if xcloud else None
    if not m or not m.group(1):
        return None, None, False
    span = m.group(3)
    try:
        span = f"{int(span):016x}" if span and 0 < int(span) < 2**64 else None
    except ValueError:
        span = None
    return m.group(1), span, m.group(5) == "1"


class DeferredHandler(logging.Handler):
    """Holds records until the real handler exists, then hands them (and every later one) to it.
    Its own filters (redaction, quiet idle runs) run when a record is logged, as on any handler."""

    def __init__(self, build: Callable[[], logging.Handler], project_id: str | None, max_defer_seconds: float = 10.0):
        super().__init__()
        self._build = build
        self._project_id = project_id
        self._real: logging.Handler | None = None
        self._held: list[logging.LogRecord] = []
        self._once = threading.Lock()  # taken by activators only: emit() never waits for the import
        self._swap = threading.RLock()  # the held list and the switch to the real handler
        self._go = threading.Event()
        self._max_defer = max_defer_seconds
        # No thread is started here: functions-framework imports main.py in gunicorn's master and
        # forks the worker, and threads do not survive a fork. Threads start in the serving process.
        self._timer_pid: int | None = None
        atexit.register(self._at_exit)
        shutdown.before_exit(self._at_exit)  # SIGTERM's grace timer ends with os._exit, which skips atexit

    @property
    def active(self) -> bool:
        return self._real is not None

    def first_response_sent(self) -> None:
        if self._real is None:
            threading.Thread(target=self.activate, name="log-handoff", daemon=True).start()

    def _at_exit(self) -> None:
        if self._held:  # held records are written; with none, a leaving process skips the import
            self.activate()

    def _build_later(self) -> None:
        self._go.wait(self._max_defer)
        self.activate()

    def activate(self) -> None:
        """Build the real handler (once) and write what was held, in order, before any later record."""
        with self._once:
            if self._real is None:
                real = self._build()  # the slow import happens here, outside the lock emit() takes
                real.setLevel(self.level)
                with self._swap:
                    held, self._held = self._held, []
                    for record in held:
                        real.handle(record)
                    self._real = real
        self._go.set()

    def emit(self, record: logging.LogRecord) -> None:
        real = self._real
        if real is None:
            for name, value in (request_context(self._project_id) or {}).items():
                if not hasattr(record, name):
                    setattr(record, name, value)
            with self._swap:
                real = self._real
                if real is None:
                    self._held.append(record)
                    full = len(self._held) >= MAX_HELD
                    if self._timer_pid != os.getpid():  # the first held record in this process
                        self._timer_pid = os.getpid()
                        threading.Thread(target=self._build_later, name="log-handoff", daemon=True).start()
            if real is None:
                if full:
                    self.activate()  # outside _swap: the builder takes _once, then _swap
                return
        real.handle(record)

    def flush(self) -> None:
        if self._real is not None:
            self._real.flush()

    def close(self) -> None:
        if self._real is not None:
            self._real.close()
        super().close()
