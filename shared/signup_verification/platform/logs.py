"""Logging set-up: Cloud Logging structured JSON on Cloud Run, a readable line on a laptop.

    configure(config)      once per process (functions/main.py at import; idempotent)
    use_sink(stream)       the seam tests fill: every line the handler writes goes to `stream`

JSON format (google-cloud-logging's StructuredLogHandler, one JSON object per line on stdout):
`severity`, `message`, `logging.googleapis.com/labels` (deployment, plus channel when a record
carries one), `logging.googleapis.com/trace` / `spanId` taken from the request's `traceparent` or
`X-Cloud-Trace-Context` header, and whatever a record passes as `extra={"json_fields": {...}}`
as top-level jsonPayload fields (numbers stay numbers, so log-based metrics can extract them).

Format: LOG_FORMAT=json|text; default json on Cloud Run (K_SERVICE is set there), text otherwise.
Level: LOG_LEVEL (default INFO). Trace ids are prefixed `projects/<id>/traces/` when
GOOGLE_CLOUD_PROJECT (or GCP_PROJECT) is set, which Cloud Logging needs to link them to Cloud Trace.

Idle runs are quiet: a dispatch or reconcile run that moved nothing logs its summary and its
signals at DEBUG, even while work waits (operations/signals.py), and so do the signals of a channel
with nothing live. In JSON they are still written
(the log-based metrics and the absence alert count every `event="signals"` record, whatever its
severity); in text, below LOG_LEVEL=DEBUG, they are not shown.

Redaction is a safety net, not the policy: code never logs a token, a code or a destination. The
filter (RedactionFilter, with platform/redaction.py's patterns) still masks anything shaped like
an email address (any script, IDN domains) or a phone number (E.164 or national), any `token=` /
`code=` value, anything shaped like a link token, and in the request URL that the structured handler
would otherwise copy into `httpRequest.requestUrl` as sent, the query string (`?token=...`) and what
its path holds (`/ada%40example.com`); the `httpRequest.userAgent` it copies keeps only its redacted
product tokens.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TextIO

from .config import LoggingConfig
from .log_handoff import DeferredHandler, request_context
from .redaction import redact_text, redact_url, redact_value, user_agent

__all__ = [
    "configure",
    "first_response_sent",
    "flush",
    "remove",
    "use_sink",
    "RedactionFilter",
    "TextFormatter",
]

_MARK = "_signup_verification_handler"


# -- the sink seam ---------------------------------------------------------------------------------
_sink: TextIO | None = None


class _SinkStream:
    """What the handler writes to: the test sink when one is set, else the current sys.stdout
    (or sys.stderr), looked up at each write so a replaced stream is followed."""

    def __init__(self, fallback: str = "stdout") -> None:
        self.fallback = fallback

    def _target(self) -> TextIO:
        return _sink or getattr(sys, self.fallback)

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()


@contextmanager
def use_sink(stream: TextIO) -> Iterator[TextIO]:
    global _sink
    previous, _sink = _sink, stream
    try:
        yield stream
    finally:
        _sink = previous


class RedactionFilter(logging.Filter):
    """Runs first on the handler: renders the message, masks it, masks json_fields and the traceback."""

    def __init__(self, with_request: bool = False) -> None:
        super().__init__()
        self.with_request = with_request  # the JSON handler copies the request URL into the record

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "_redacted", False):
            if not isinstance(record.msg, Mapping):
                record.msg = redact_text(record.getMessage())
                record.args = None
            else:
                record.msg = redact_value(record.msg)
            fields = getattr(record, "json_fields", None)
            if isinstance(fields, Mapping):
                record.json_fields = redact_value(fields)
            if record.exc_info and not record.exc_text:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
            if record.exc_text:
                record.exc_text = redact_text(record.exc_text)
            if record.stack_info:
                record.stack_info = redact_text(record.stack_info)
            record._redacted = True
        if self.with_request:
            self._request_without_query(record)
        return True

    @staticmethod
    def _request_without_query(record: logging.LogRecord) -> None:
        """The structured handler copies the Flask request into httpRequest: the URL and referer
        with their path redacted and without their query, the User-Agent without its comments and
        redacted."""
        if hasattr(record, "http_request"):
            request = record.http_request
        else:  # the library's own view of the Flask request, without importing the library (cold start)
            request = (request_context(None) or {}).get("http_request")
        if isinstance(request, Mapping):
            request = dict(request)
            request["requestUrl"] = redact_url(request.get("requestUrl"))
            if request.get("referer"):
                request["referer"] = redact_url(request["referer"])
            if request.get("userAgent"):
                request["userAgent"] = user_agent(request["userAgent"])
        record.http_request = request


# -- records written in JSON at any severity ------------------------------------------------------
SIGNALS_LOGGER = "signup_verification.operations.signals"
# The run summaries: a run that moved nothing logs at DEBUG (the emitter says so: hidden in text below
# LOG_LEVEL=DEBUG); in JSON they and the signal records are written whatever their severity, because
# operators read them in Cloud Logging and the log-based metrics count them (the absence alert).
RUN_LOGGERS = (SIGNALS_LOGGER, "signup_verification.operations.dispatcher", "signup_verification.operations.reconciler")


# -- formats ---------------------------------------------------------------------------------------
class TextFormatter(logging.Formatter):
    """`12:00:01.234 INFO  signup_verification.reconciler: message  key=value ...` for a terminal."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s.%(msecs)03d %(levelname)-7s %(name)s: %(message)s", "%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = getattr(record, "json_fields", None)
        if isinstance(fields, Mapping) and fields:
            rendered = " ".join(
                f"{k}={json.dumps(v, default=str) if not isinstance(v, str) else v}"
                for k, v in fields.items()
                if k != "message"
            )
            first, sep, rest = line.partition("\n")
            line = f"{first}  {rendered}{sep}{rest}"
        return line


def _structured(deployment: str, project_id: str | None, target: TextIO | _SinkStream) -> logging.Handler:
    # Imported here: google-cloud-logging costs ~0.3-0.4 s of CPU to import, paid by every verifyctl
    # process (config/ imports this module) though only the JSON format needs it.
    from google.cloud.logging_v2.handlers import StructuredLogHandler

    return StructuredLogHandler(
        labels={"deployment": deployment}, stream=target, project_id=project_id, json_encoder_cls=_Encoder
    )


def build_handler(
    fmt: str,
    *,
    deployment: str,
    project_id: str | None = None,
    stream: TextIO | None = None,
    stderr: bool = False,
    defer: bool = False,
) -> logging.Handler:
    """defer=True (functions/main.py): JSON through a DeferredHandler, the library imported after the
    first answer (log_handoff.py)."""
    target = stream or _SinkStream("stderr" if stderr else "stdout")
    handler: logging.Handler
    if fmt == "json" and defer:
        handler = DeferredHandler(lambda: _structured(deployment, project_id, target), project_id)
    elif fmt == "json":
        handler = _structured(deployment, project_id, target)
    else:
        handler = logging.StreamHandler(target)
        handler.setFormatter(TextFormatter())
    handler.filters.insert(
        0, RedactionFilter(with_request=fmt == "json")
    )  # before CloudLoggingFilter reads the request
    setattr(handler, _MARK, True)
    return handler


class _Encoder(json.JSONEncoder):
    def default(self, o: Any) -> Any:  # datetimes, UUIDs, Decimals in json_fields
        return str(o)


def first_response_sent() -> None:
    """The first answer is out: a deferred handler may import the library now (in its own thread)."""
    for existing in logging.getLogger().handlers:
        if isinstance(existing, DeferredHandler):
            existing.first_response_sent()


def flush() -> None:
    """Write everything now: a deferred handler builds the real one at once (tests, verifyctl exit)."""
    for existing in logging.getLogger().handlers:
        if isinstance(existing, DeferredHandler):
            existing.activate()
        existing.flush()


def remove() -> None:
    """Take the handler `configure` installed off the root logger (tests restore the process this way)."""
    root = logging.getLogger()
    for existing in list(root.handlers):
        if getattr(existing, _MARK, False):
            if isinstance(existing, DeferredHandler):
                existing.activate()  # what it holds is written, not dropped with it
            root.removeHandler(existing)


def configure(
    config: LoggingConfig | None = None,
    *,
    deployment: str | None = None,
    fmt: str | None = None,
    level: str | int | None = None,
    stream: TextIO | None = None,
    stderr: bool = False,
    defer: bool = False,
) -> logging.Handler:
    """Install the handler on the root logger, replacing the one a previous call installed.
    Lines go to stdout (Cloud Run collects it), or stderr with stderr=True (verifyctl).
    The keyword arguments override the config (tests); defer: see build_handler."""
    config = config or LoggingConfig()
    handler = build_handler(
        fmt or config.format,
        deployment=deployment or config.deployment,
        project_id=config.project_id,
        stream=stream,
        stderr=stderr,
        defer=defer,
    )
    remove()
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level or config.level.upper())
    fmt = fmt or config.format
    for name in RUN_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if fmt == "json" else logging.NOTSET)
    # The client library's own loggers must not feed back into a handler that may call it; pgserver's
    # progress lines (the embedded database, local only) are not ours to show.
    for name in ("google.cloud", "google.auth", "urllib3", "pgserver"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # The library's one-time diagnostic line goes through its own handler; do not print it twice.
    logging.getLogger("google.cloud.logging_v2.handlers.structured_log").propagate = False
    return handler
