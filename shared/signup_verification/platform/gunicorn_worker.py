"""gunicorn's threaded worker with the limits platform/serving.py describes (LIMITS, HEAD_BYTES):
imported when functions-framework builds its gunicorn server (never before the first answer's code
path needs it).

The head's deadline and size are kept by ReadGuard, a proxy of the connection's socket that every
read of the request goes through: armed for the head when the worker takes a request off the
connection, for the body once the head is parsed, disarmed once the target has answered. A read
past the deadline, or past HEAD_BYTES of head, ends the request; the worker answers it with
problem+json (handle_error) instead of gunicorn's HTML page.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from typing import Any

from gunicorn.http.errors import LimitRequestHeaders, LimitRequestLine
from gunicorn.util import write_nonblock
from gunicorn.workers.gthread import ThreadWorker

HEAD_BYTES = 64 * 1024  # a request line and headers; ours (a JWT, traceparent, Idempotency-Key) are ~3 KB
LIMITS: dict[str, Any] = {
    "limit_request_line": 8190,
    "limit_request_fields": 100,
    "limit_request_field_size": 8190,
}
_log = logging.getLogger("signup_verification.platform.serving")
PROBLEM_BASE = "/problems/"  # api/problem_types.py's BASE (platform cannot import it): served by every target


class RequestTimeout(Exception):
    """The client did not send its request's head (or body) within the read deadline."""


class ReadGuard:
    """The connection's socket, every recv within the armed deadline (and, for a head, HEAD_BYTES).
    Everything else goes to the socket. Fires once, then disarms: closing the connection reads on."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._deadline: float | None = None
        self._head = False
        self._read = 0

    def arm(self, seconds: float, head: bool) -> None:
        self._deadline, self._head, self._read = time.monotonic() + seconds, head, 0

    def disarm(self) -> None:
        self._deadline = None

    def recv(self, size: int, *flags: int) -> bytes:
        if self._deadline is None:
            return self._sock.recv(size, *flags)
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise self._fired()
        self._sock.settimeout(remaining)
        try:
            data = self._sock.recv(size, *flags)
        except TimeoutError:
            raise self._fired() from None
        finally:
            self._sock.settimeout(None)
        if self._head:
            self._read += len(data)
            if self._read > HEAD_BYTES + 8192:  # what one read past the head's end may carry of a body
                self.disarm()
                raise LimitRequestHeaders(f"the request head is larger than {HEAD_BYTES} bytes")
        return data

    def _fired(self) -> RequestTimeout:
        self.disarm()
        return RequestTimeout("head" if self._head else "body")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class LimitedThreadWorker(ThreadWorker):
    """gunicorn's gthread worker, each connection's reads through a ReadGuard."""

    read_timeout_seconds = 10.0

    def handle(self, conn: Any) -> Any:
        if not isinstance(conn.sock, ReadGuard):
            conn.sock = ReadGuard(conn.sock)  # before conn.init(): the parser reads through it
        conn.sock.arm(self.read_timeout_seconds, head=True)
        return super().handle(conn)

    def handle_request(self, req: Any, conn: Any) -> Any:
        conn.sock.arm(self.read_timeout_seconds, head=False)  # the head is in: the body, within its own
        try:
            return super().handle_request(req, conn)
        finally:
            conn.sock.disarm()

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        refusal = _refusal(exc)
        if refusal is None:
            super().handle_error(req, client, addr, exc)
            return
        status, reason, slug, detail = refusal
        _log.warning(
            "refused a request before any target code ran: %s",
            detail,
            extra={"json_fields": {"event": "request_refused", "status": status, "reason": slug}},
        )
        body = json.dumps({"type": PROBLEM_BASE + slug, "title": reason, "status": status, "detail": detail})
        head = (
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/problem+json\r\n"
            f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
        )
        try:
            write_nonblock(client, (head + body).encode("latin-1"))
        except OSError:
            pass  # the client is gone: nothing to tell


def _refusal(exc: BaseException) -> tuple[int, str, str, str] | None:
    """(status, reason, problem slug, detail) for the refusals of platform/serving.py; the detail
    never quotes the request (an over-long line may hold a token)."""
    if isinstance(exc, RequestTimeout):
        return 408, "Request Timeout", "request-timeout", f"The request's {exc} did not arrive in time."
    if isinstance(exc, LimitRequestLine):
        return (
            414,
            "URI Too Long",
            "request-line-too-long",
            f"The request line must be at most {LIMITS['limit_request_line']} bytes.",
        )
    if isinstance(exc, LimitRequestHeaders):
        detail = (
            f"At most {LIMITS['limit_request_fields']} header fields of at most "
            f"{LIMITS['limit_request_field_size']} bytes each, {HEAD_BYTES} bytes in all."
        )
        return 431, "Request Header Fields Too Large", "request-headers-too-large", detail
    return None


def limited(application: type, read_timeout_seconds: float) -> type:
    """functions-framework's GunicornApplication with the limits and this worker in its options."""

    class Worker(LimitedThreadWorker):
        pass

    Worker.read_timeout_seconds = read_timeout_seconds

    class LimitedApplication(application):
        def load_config(self) -> None:
            self.options.update(LIMITS, worker_class=Worker)
            super().load_config()

    return LimitedApplication
