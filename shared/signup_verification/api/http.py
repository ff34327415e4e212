"""HTTP plumbing shared by the entry points in functions/main.py: the request read once into an
`Incoming`, JSON parsing with limits, and the error boundary that turns every failure into
problem+json (never exception text).

The body limit holds at the edge, before any handler runs (api/edge.py calls `read_body` first):
a body of `max_bytes` or more, declared by Content-Length or counted as a chunked body arrives,
is refused with a streamed 413, so nothing acts on it and functions-framework's after-request
drain (which reads whatever is left of the body once a handler answered) never touches it. An
accepted body is read to its end, so that drain finds nothing left to read."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ParamSpec, cast

import flask
from werkzeug.datastructures import MultiDict
from werkzeug.exceptions import RequestEntityTooLarge

from ..platform.database import UnavailableError
from . import problems
from .problems import Problem

_log = logging.getLogger("signup_verification.api.http")

Response = tuple[Any, int, dict[str, str]]
P = ParamSpec("P")

BODY_KEY = "signup_verification.body"  # the WSGI environ key of the body the edge read
_CHUNK = 64 * 1024


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return json.dumps(body), status, {"Content-Type": "application/json", **(headers or {})}


@dataclass(frozen=True)
class Incoming:
    """What the handlers, auth and the pages see of a request: read once, at the edge, within the limit."""

    method: str
    mimetype: str
    headers: Mapping[str, str]  # werkzeug's Headers: case-insensitive
    args: MultiDict[str, str]  # the query string; `.get` gives the first value
    body: bytes
    path: str = "/"  # the path as sent on the request line (percent-encoding kept), what a signature covers
    query: str = ""  # the raw query string as sent, without the '?'


def too_large(max_bytes: int) -> Problem:
    """413, streamed: functions-framework skips its drain after a streamed answer, so the rest of
    the body is never read (the server discards or closes)."""
    return problems.too_large(max_bytes - 1)  # its detail names the largest body accepted


def _unreadable() -> Problem:
    return Problem(
        400,
        "invalid-request",
        "The request is invalid",
        "The body ended before its Content-Length, or its chunked framing is invalid.",
        streamed=True,
    )


def read_body(request: flask.Request, max_bytes: int) -> bytes:
    """The request body, read once and kept in the environ; a 413 Problem when it is `max_bytes`
    long or longer (declared or as it arrives), a 400 one when it cannot be read to its end.

    A declared Content-Length at or over the limit is refused unread. Otherwise at most `max_bytes`
    bytes are read: reaching that many means the body is too large, whatever its Content-Length or
    chunks said, so no shortened body is ever acted on. A body that ends before its Content-Length
    (the client closed its side early) is refused too: gunicorn and werkzeug's stream end it
    quietly there, and acting on it would act on less than the caller declared."""
    kept = request.environ.get(BODY_KEY)
    if isinstance(kept, bytes):
        return kept
    declared = request.content_length
    if declared is not None and declared >= max_bytes:
        raise too_large(max_bytes)
    chunks, size = [], 0
    try:
        stream = request.stream  # werkzeug bounds it by Content-Length, or by MAX_CONTENT_LENGTH when chunked
        while size < max_bytes:
            chunk = stream.read(min(_CHUNK, max_bytes - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except RequestEntityTooLarge:  # the app's own MAX_CONTENT_LENGTH, if smaller, refused it first
        raise too_large(min(max_bytes, request.max_content_length or max_bytes)) from None
    except Exception:  # a client gone before its Content-Length, a malformed chunk (gunicorn's ParseException)
        raise _unreadable() from None
    if size >= max_bytes:
        raise too_large(max_bytes)
    if declared is not None and size != declared:  # the client stopped early: not the body it declared
        raise _unreadable()
    body = b"".join(chunks)
    request.environ[BODY_KEY] = body
    return body


def read_request(request: flask.Request, max_bytes: int) -> Incoming:
    """The request with its body read once (`read_body`), or a 413/400 Problem."""
    body = read_body(request, max_bytes)
    return Incoming(
        request.method,
        request.mimetype,
        cast(Mapping[str, str], request.headers),
        request.args,
        body,
        raw_path(request.environ, request.path),
        request.environ.get("QUERY_STRING", ""),
    )


def raw_path(environ: Mapping[str, Any], decoded: str) -> str:
    """The path as the request line sent it: gunicorn's RAW_URI, werkzeug's REQUEST_URI (both the
    request-target, query included), else the decoded path the framework routed."""
    target = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    if not isinstance(target, str) or not target:
        return decoded or "/"
    if not target.startswith("/"):  # absolute-form (`GET http://host/path HTTP/1.1`): its path
        scheme, _, rest = target.partition("://")
        target = "/" + rest.partition("/")[2] if scheme and rest else target
    return target.split("?", 1)[0] or "/"


def require_method(request: Incoming, *allowed: str) -> None:
    if request.method not in allowed:
        raise problems.method_not_allowed(", ".join(allowed))


def json_body(request: Incoming) -> dict[str, Any]:
    """The request's JSON object, or a 4xx Problem."""
    if request.mimetype != "application/json":
        raise problems.unsupported_media_type()
    try:
        data = json.loads(request.body.decode("utf-8"), object_pairs_hook=_unique_keys)
    except DuplicateKey as exc:  # last-wins would let a proxy and we disagree on what was sent
        raise problems.bad_request(
            "The body repeats a JSON key.", [{"pointer": "#", "detail": f"duplicate key {exc.key!r}"[:120]}]
        ) from None
    except (UnicodeDecodeError, ValueError, RecursionError):  # RecursionError: '[[[[...' within the size limit
        raise problems.bad_request("The body is not valid UTF-8 JSON.") from None
    if not isinstance(data, dict):
        raise problems.bad_request("The body must be a JSON object.")
    return data


class DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise DuplicateKey(key)
        data[key] = value
    return data


def single_header(request: Incoming, name: str) -> str | None:
    """The header's value, or a 400 Problem when it is sent twice (first-wins hides a conflict).
    WSGI servers (gunicorn, werkzeug) join a repeated header into one value with commas, so a
    comma is refused too: such a value cannot be told apart from two headers."""
    values = cast(Any, request.headers).getlist(name)
    if len(values) > 1 or any("," in value for value in values):
        raise problems.bad_request(
            f"The {name} header was sent more than once.", [{"pointer": f"header/{name}", "detail": "repeated"}]
        )
    return values[0] if values else None


def endpoint(handler: Callable[P, Response]) -> Callable[P, Response]:
    """Error boundary: Problem -> its problem+json, lost database -> 503, anything else -> opaque 500."""

    @functools.wraps(handler)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> Response:
        try:
            return handler(*args, **kwargs)
        except Problem as problem:
            return problem.response()
        except UnavailableError as exc:
            _log.error("database unavailable: %s", exc)
            return problems.unavailable().response()
        except Exception:  # the boundary: log the traceback, answer without it
            _log.exception("unhandled error in %s", handler.__name__)
            return problems.internal_error().response()

    return wrapper
