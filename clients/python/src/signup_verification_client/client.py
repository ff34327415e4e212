"""The HTTP client: create (idempotent, retried briefly, with an optional fallback or ordered steps), get, confirm a code.

Each target of the service is its own deployment with its own URL: `create_url` serves create and
the read (`GET /<verification_id>`), `confirm_url` the code confirmation. Redirects are never
followed (an answer that moved is an error, not a place to resend a signed body to).
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from . import errors, models
from .auth import CallerAuth
from .models import Confirmation, Fallback, Step, Verification, VerificationState

RETRYABLE = frozenset({429, 503})
T = TypeVar("T")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the 3xx surfaces as an HTTPError


class Client:
    """`create_url`: the create_verification target (create and read); `confirm_url`: the
    confirm_verification target (`confirm_code`). `auth`: a `GoogleIdToken`, `SignedRequests`, or None
    (the local emulation needs no identity).

    Made to be called inside a request handler, so it never waits long: `create` retries a 503 or an
    unreachable service up to `max_attempts` times, each wait at most `max_retry_wait` seconds (2: a
    longer `Retry-After` is not waited for), and never retries a 429. A 429 means this destination (or
    account, or network) was just sent a message: waiting it out and creating again would send another,
    the very thing the limit is there to stop. `RateLimited.retry_after` says when to ask again."""

    def __init__(
        self,
        create_url: str,
        confirm_url: str | None = None,
        *,
        auth: CallerAuth | None = None,
        timeout: float = 10.0,
        max_attempts: int = 3,
        max_retry_wait: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.create_url = create_url.rstrip("/") + "/"
        self.confirm_url = confirm_url.rstrip("/") + "/" if confirm_url else None
        self.auth = auth
        self.timeout = timeout
        self.max_attempts = max(1, max_attempts)
        self.max_retry_wait = max_retry_wait
        self._sleep = sleep
        self._opener = urllib.request.build_opener(_NoRedirect)

    # -- the API ------------------------------------------------------------------------------------
    def create(
        self,
        account_id: str,
        channel: str,
        destination: str,
        *,
        fallback: Fallback | None = None,
        locale: str | None = None,
        template: str | None = None,
        return_url: str | None = None,
        client_ip: str | None = None,
        idempotency_key: str | None = None,
    ) -> Verification:
        """Create a verification (its email or SMS is queued; with `fallback`, the other channel's
        message too, `fallback.after_seconds` later). The key is generated unless given and kept for
        every retry, so a retried create never sends twice; every error raised carries it as
        `idempotency_key`. `RateLimited` is raised at once, with its `retry_after`."""
        payload: dict[str, Any] = {"account_id": account_id, "channel": channel, "destination": destination}
        if fallback is not None:
            payload["fallback"] = fallback.as_json()
        return self._create_from(payload, locale, template, return_url, client_ip, idempotency_key)

    def create_steps(
        self,
        account_id: str,
        steps: Sequence[Step],
        *,
        locale: str | None = None,
        template: str | None = None,
        return_url: str | None = None,
        client_ip: str | None = None,
        idempotency_key: str | None = None,
    ) -> Verification:
        """Create a verification that tries its steps in order (at most three, each on a channel of its
        own): the first at once, each later one at its `after_seconds` or when the step before failed
        for good, none after a proof. Two steps are the same request as `create` with a `fallback` (the
        same key replays either); the answer lists the steps when there is a third (`Verification.steps`)."""
        payload: dict[str, Any] = {"account_id": account_id, "steps": [step.as_json() for step in steps]}
        return self._create_from(payload, locale, template, return_url, client_ip, idempotency_key)

    def _create_from(
        self,
        payload: dict[str, Any],
        locale: str | None,
        template: str | None,
        return_url: str | None,
        client_ip: str | None,
        idempotency_key: str | None,
    ) -> Verification:
        key = idempotency_key or str(uuid.uuid4())
        fields = {"locale": locale, "template": template, "return_url": return_url, "client_ip": client_ip}
        payload.update({name: value for name, value in fields.items() if value is not None})
        try:
            return self._create(json.dumps(payload, separators=(",", ":")).encode(), key)
        except errors.VerificationError as exc:
            exc.idempotency_key = key
            raise

    def _create(self, body: bytes, key: str) -> Verification:
        for attempt in range(1, self.max_attempts + 1):
            try:
                _, headers, answer = self._send("POST", self.create_url, "create_verification", body, key)
                return _parsed(models.verification, answer, key, headers.get("idempotent-replayed") == "true")
            except errors.Unavailable as exc:  # nothing was written, or it is unknown: the same key is safe
                wait = exc.retry_after if exc.retry_after is not None else float(attempt)
                if attempt == self.max_attempts or wait > self.max_retry_wait:
                    raise
                self._sleep(max(wait, 1.0))  # >= 1 s: a re-signed retry in the same second would be a replay
        raise AssertionError("unreachable")  # the loop returns or raises

    def get(self, verification_id: str) -> VerificationState:
        """The verification's state now; `NotFound` for an unknown id."""
        _, _, answer = self._send("GET", self.create_url + verification_id, "create_verification", b"", None)
        return _parsed(models.verification_state, answer)

    def confirm_code(self, verification_id: str, code: str) -> Confirmation:
        """Confirm an SMS code the person typed into your own form (or send them to the verification's
        `code_entry_url` instead): the number is proved (`Confirmation.proof`). `CodeIncorrect` (tries
        left), `VerificationGone` (it can no longer prove: `get` says why), `NotFound`."""
        if self.confirm_url is None:
            raise ValueError("confirm_code needs the confirm_verification URL (Client(confirm_url=...))")
        body = json.dumps({"verification_id": verification_id, "code": code}).encode()
        _, _, answer = self._send("POST", self.confirm_url, None, body, None)
        return _parsed(models.confirmation, answer)

    # -- HTTP ---------------------------------------------------------------------------------------
    def _send(
        self, method: str, url: str, target: str | None, body: bytes, key: str | None
    ) -> tuple[int, dict[str, str], Any]:
        headers = {"Accept": "application/json"}
        if method == "POST":
            headers["Content-Type"] = "application/json"
        if key is not None:
            headers["Idempotency-Key"] = key
        if self.auth is not None and target is not None:  # confirm is public: no identity sent there
            headers.update(self.auth.headers(method, target, key, body, url))
        request = urllib.request.Request(url, data=body if method == "POST" else None, method=method, headers=headers)
        try:
            with self._opener.open(request, timeout=self.timeout) as response:  # noqa: S310 - http(s) URLs of the service
                return response.status, _lower(response.headers), _json(response.read())
        except urllib.error.HTTPError as exc:
            answer_headers = _lower(exc.headers)
            raise errors.from_problem(exc.code, _json(exc.read()), _retry_after(answer_headers)) from None
        except (urllib.error.URLError, http.client.HTTPException, TimeoutError, ConnectionError) as exc:
            reason = getattr(exc, "reason", exc)
            raise errors.Unavailable(503, "unreachable", "The service could not be reached", str(reason)) from None


def _parsed(parse: Callable[..., T], answer: Any, *args: Any) -> T:
    """The typed answer; a success whose body is not the documented JSON is `Unavailable`
    (`invalid-answer`): what happened is unknown, so the same request may be retried."""
    if isinstance(answer, Mapping):
        try:
            return parse(answer, *args)
        except (KeyError, TypeError, ValueError):
            pass
    raise errors.Unavailable(502, "invalid-answer", "The service's answer could not be read") from None


def _lower(headers: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in (headers.items() if headers is not None else [])}


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw.decode("utf-8")) if raw else None
    except (UnicodeDecodeError, ValueError):
        return None


def _retry_after(headers: dict[str, str]) -> float | None:
    value = headers.get("retry-after", "")
    return float(value) if value.strip().isdigit() else None
