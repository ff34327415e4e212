"""HTTP plumbing shared by the entry points in functions/main.py: the request read once into an
`Incoming`, JSON parsing with limits, and the error boundary that turns every failure into
problem+json (never exception text)."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import flask
from werkzeug.datastructures import MultiDict
from werkzeug.exceptions import RequestEntityTooLarge

from ..platform.database import UnavailableError
from . import problems
from .problems import Problem

_log = logging.getLogger("signup_verification.api.http")

Response = tuple[Any, int, dict[str, str]]


@dataclass(frozen=True)
class HttpConfig:
    max_body_bytes: int = 16 * 1024  # MAX_BODY_BYTES: a larger request body is refused (413)


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


def read_request(request: flask.Request, max_bytes: int) -> Incoming:
    """The request with its body read once (at most max_bytes + 1 bytes), or a 413 Problem."""
    if request.content_length is not None and request.content_length > max_bytes:
        raise problems.too_large(max_bytes)
    try:
        raw = request.stream.read(max_bytes + 1)
    except RequestEntityTooLarge:  # the app's own (smaller) MAX_CONTENT_LENGTH refused it first
        raise problems.too_large(min(max_bytes, request.max_content_length or max_bytes)) from None
    if len(raw) > max_bytes:
        raise problems.too_large(max_bytes)
    return Incoming(request.method, request.mimetype, cast(Mapping[str, str], request.headers), request.args, raw)


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


def endpoint(handler: Callable[[flask.Request], Response]) -> Callable[[flask.Request], Response]:
    """Error boundary: Problem -> its problem+json, lost database -> 503, anything else -> opaque 500."""

    @functools.wraps(handler)
    def wrapper(request: flask.Request) -> Response:
        try:
            return handler(request)
        except Problem as problem:
            return problem.response()
        except UnavailableError as exc:
            _log.error("database unavailable: %s", exc)
            return problems.unavailable().response()
        except Exception:  # the boundary: log the traceback, answer without it
            _log.exception("unhandled error in %s", handler.__name__)
            return problems.internal_error().response()

    return wrapper
