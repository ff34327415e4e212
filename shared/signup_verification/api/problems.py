"""RFC 9457 problem details for every HTTP error: a stable type URI, a title, and per-field errors.

The type is `/problems/<slug>`, documented there by every target and in docs/problems.md
(api/problem_types.py). Error bodies never carry exception text, tokens, codes or destinations.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .problem_types import BASE as PROBLEM_BASE

PROBLEM_JSON = "application/problem+json"


@dataclass
class Problem(Exception):
    status: int
    slug: str
    title: str
    detail: str | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    extensions: dict[str, Any] = field(default_factory=dict)  # RFC 9457 extension members
    # functions-framework drains the whole request body after every non-streamed response; a
    # streamed answer skips that drain, so an oversized body is never read.
    streamed: bool = False

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"type": PROBLEM_BASE + self.slug, "title": self.title, "status": self.status}
        if self.detail:
            body["detail"] = self.detail
        if self.errors:
            body["errors"] = self.errors
        body.update(self.extensions)
        return body

    def response(self) -> tuple[Any, int, dict[str, str]]:
        body = json.dumps(self.body())
        return iter([body]) if self.streamed else body, self.status, {"Content-Type": PROBLEM_JSON, **self.headers}


def bad_request(detail: str, errors: list[dict[str, Any]] | None = None) -> Problem:
    return Problem(400, "invalid-request", "The request is invalid", detail, errors or [])


def method_not_allowed(allowed: str) -> Problem:
    return Problem(405, "method-not-allowed", "Method not allowed", f"Use {allowed}.", headers={"Allow": allowed})


def unsupported_media_type() -> Problem:
    return Problem(415, "unsupported-media-type", "Unsupported media type", "Send Content-Type: application/json.")


def too_large(limit: int) -> Problem:
    detail = f"The body must be at most {limit} bytes."
    return Problem(413, "payload-too-large", "Request body too large", detail, streamed=True)


def unavailable(retry_after: int = 5) -> Problem:
    return Problem(
        503,
        "service-unavailable",
        "Service temporarily unavailable",
        "The database could not be reached; retry the same request.",
        headers={"Retry-After": str(retry_after)},
    )


def internal_error() -> Problem:
    return Problem(500, "internal-error", "Internal error", "The error was logged; retry later.")
