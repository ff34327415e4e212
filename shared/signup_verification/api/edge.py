"""The Flask app functions-framework builds around each target: the body limit, checked before
any handler runs (`http.read_body`: a body of MAX_BODY_BYTES or more is answered 413 and nothing
acts on it), our own answers for the two paths functions-framework reserves (/robots.txt,
/favicon.ico), the documentation of the problem types at /problems/ (where every problem's `type`
points: api/problem_types.py), and problem+json for Flask's own HTTP errors, every one with the
security headers the pages send."""

from __future__ import annotations

import threading
from collections.abc import Callable

import flask
from werkzeug.exceptions import HTTPException

from ..platform.config import Target
from . import problem_types, problems
from .config import DeliveryReportsConfig, HttpConfig
from .http import read_body
from .page_headers import SECURITY_HEADERS
from .problems import Problem

ROBOTS = "User-agent: *\nDisallow: /\n"  # nothing here is for crawlers: confirm links are one-time secrets
_HARDENING = {k: v for k, v in SECURITY_HEADERS.items() if k != "Content-Type"}


def body_limit(target: Target | None, http: HttpConfig, reports: DeliveryReportsConfig) -> int:
    """delivery_reports takes provider batches (SendGrid posts up to ~1,000 events at once): its own limit."""
    return reports.max_body_bytes if target is Target.DELIVERY_REPORTS else http.max_body_bytes


def configure(app: flask.Flask, max_body_bytes: int) -> None:
    # werkzeug bounds by it a stream the server marks terminated (gunicorn: every body; werkzeug's
    # own server: chunked ones), so even an endless chunked body is never read past the limit
    app.config["MAX_CONTENT_LENGTH"] = max_body_bytes

    def body_within_limit() -> flask.typing.ResponseReturnValue | None:
        """The whole body, read here or refused here: a handler only ever runs on a body that
        arrived complete and under the limit (no shortened body, no 500 from the later drain)."""
        try:
            read_body(flask.request, max_body_bytes)
        except Problem as problem:  # streamed, so functions-framework does not drain the rest
            return problem.response()
        return None

    app.before_request(body_within_limit)  # first: before the reserved paths answer too
    app.before_request(_reserved_paths)
    app.register_error_handler(HTTPException, _http_error)
    app.after_request(_harden)


def after_first_response(app: flask.Flask, callback: Callable[[], None]) -> None:
    """callback() once, when the server closes the first response (its bytes are sent): the deferred
    log handler's cue (platform/log_handoff.py)."""
    done = threading.Event()

    def hook(response: flask.Response) -> flask.Response:
        if not done.is_set():
            done.set()
            response.call_on_close(callback)
        return response

    app.after_request(hook)


def _reserved_paths() -> flask.Response | None:
    path = flask.request.path
    if (path + "/").startswith(problem_types.BASE) and flask.request.method in ("GET", "HEAD"):
        found = problem_types.page(path.removeprefix(problem_types.BASE.rstrip("/")).strip("/"))
        if found is None:
            body, status, headers = problems.Problem(404, "http-error", "Not Found", "No such problem type.").response()
            return flask.Response(body, status, headers)
        return flask.Response(found[0], found[1], found[2])
    if path == "/robots.txt":
        return flask.Response(ROBOTS, 200, {"Content-Type": "text/plain; charset=utf-8"})
    if path == "/favicon.ico":
        return flask.Response(b"", 204)  # no icon; a 204 keeps browsers from asking again and again
    return None


def _http_error(error: HTTPException) -> flask.Response:
    """Flask's own errors (413 from MAX_CONTENT_LENGTH, 404/405 of reserved rules) as problem+json."""
    status = error.code or 500
    slug = "payload-too-large" if status == 413 else "http-error"
    body, _, headers = problems.Problem(status, slug, error.name, error.description).response()
    return flask.Response(body, status, headers)


def _harden(response: flask.Response) -> flask.Response:
    for name, value in _HARDENING.items():
        response.headers.setdefault(name, value)
    return response
