"""Typed errors from the service's problem+json answers (RFC 9457): one class per thing a site does
differently, chosen by the problem's stable `type` slug (and the status when the slug is new)."""

from __future__ import annotations

from typing import Any


class VerificationError(Exception):
    """Any answer that is not a success. `status`, `slug` (the end of the problem `type` URI),
    `title`, `detail` and the per-field `errors` come from the problem body.

    `idempotency_key`: on every error `Client.create` raises, the key the request was sent under.
    Store it with your signup row and retry with `create(..., idempotency_key=exc.idempotency_key)`:
    whether or not the service wrote the verification, the retry never sends a second message."""

    idempotency_key: str | None = None

    def __init__(
        self, status: int, slug: str, title: str, detail: str | None = None, body: dict[str, Any] | None = None
    ):
        super().__init__(f"{status} {slug}: {detail or title}")
        self.status, self.slug, self.title, self.detail = status, slug, title, detail
        self.body = body or {}
        self.errors: list[dict[str, str]] = list(self.body.get("errors") or [])


class InvalidRequest(VerificationError):
    """400: a field is invalid (`errors` names each one by JSON pointer). Fix the request; do not retry it."""


class Unauthenticated(VerificationError):
    """401: the caller's identity or request signature was refused."""


class NotFound(VerificationError):
    """404: no such verification (or link, or code's verification)."""


class VerificationGone(VerificationError):
    """410: the verification is finished (`reason`: `finished` for a code, whatever the state; for a
    link `expired`, `superseded` or `locked`). Only a new verification helps; `get` says which state."""

    @property
    def reason(self) -> str:
        return self.slug.removeprefix("verification-")


class IdempotencyKeyReused(VerificationError):
    """422: this Idempotency-Key was used with another request body."""


class DestinationRefused(VerificationError):
    """422 at create: the destination is not allowed (`destination-suppressed`, a number's country or
    type: a landline is for voice only), or the channel is not offered here (`channel-not-offered`);
    `errors` points at the field (`#/destination`, `#/fallback/destination`, `#/channel`, ...)."""


class CodeIncorrect(VerificationError):
    """422 at confirm: the code is wrong; `remaining_attempts` tries are left."""

    @property
    def remaining_attempts(self) -> int | None:
        value = self.body.get("remaining_attempts")
        return value if isinstance(value, int) else None


class RateLimited(VerificationError):
    """429: too many for this destination, account or network: a message went there moments ago.
    `retry_after`: seconds until a new create may be let through (the client never waits for it: a
    create after the wait sends another message). Tell the user to use the message already sent; do
    not show the wait or the detail: it tells whether an address asked for a code."""

    def __init__(self, *args: Any, retry_after: float | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.retry_after = retry_after


class Unavailable(VerificationError):
    """503: nothing was written; or the service unreachable or its answer unreadable, when it may
    have been (slug `unreachable`). Either way, retry later with the same `idempotency_key`."""

    def __init__(self, *args: Any, retry_after: float | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.retry_after = retry_after


class InvalidWebhook(Exception):
    """A webhook request whose signature, timestamp or body did not verify: answer it 400, do not act on it."""


_BY_STATUS: dict[int, type[VerificationError]] = {
    400: InvalidRequest,
    401: Unauthenticated,
    404: NotFound,
    410: VerificationGone,
    429: RateLimited,
    503: Unavailable,
}
_BY_SLUG: dict[str, type[VerificationError]] = {
    "idempotency-key-reused": IdempotencyKeyReused,
    "code-incorrect": CodeIncorrect,
}


def from_problem(status: int, body: Any, retry_after: float | None = None) -> VerificationError:
    """The typed error for an answer; a body that is not problem+json still gets its status's class."""
    problem = body if isinstance(body, dict) else {}
    slug = str(problem.get("type") or "").rstrip("/").rpartition("/")[2] or f"http-{status}"
    title = str(problem.get("title") or f"HTTP {status}")
    detail = problem.get("detail") if isinstance(problem.get("detail"), str) else None
    cls = _BY_SLUG.get(slug) or (DestinationRefused if status == 422 else _BY_STATUS.get(status, VerificationError))
    if cls in (RateLimited, Unavailable):
        return cls(status, slug, title, detail, problem, retry_after=retry_after)
    return cls(status, slug, title, detail, problem)
