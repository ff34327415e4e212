"""HTTP for the provider APIs (urllib3): pooled keep-alive connections, explicit timeouts, no
automatic retries (a retry is the outbox's decision, never the HTTP library's), and a failure
classified by how far the request got."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .base import SendResult

if TYPE_CHECKING:  # urllib3 is imported when a client is built: config/ loads this module for every
    import urllib3  # target, and only dispatch sends (cold start of create and confirm)
    from urllib3.exceptions import ProtocolError


@dataclass(frozen=True)
class HttpAnswer:
    status: int
    headers: urllib3.HTTPHeaderDict
    body: bytes


class HttpFailure(Exception):
    def __init__(self, result: SendResult):
        self.result = result


class HttpClient:
    def __init__(
        self, *, timeout: float, connect_timeout: float = 5.0, pool_size: int = 8, ca_certs: str | None = None
    ):
        import urllib3

        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._pool = urllib3.PoolManager(num_pools=4, maxsize=pool_size, block=False, retries=False, ca_certs=ca_certs)

    def post(self, url: str, deadline: float, *, body: bytes, headers: dict[str, str]) -> HttpAnswer:
        left = deadline - time.monotonic()
        if left <= 0:
            raise HttpFailure(SendResult.retryable("deadline", "no time left before the request started"))
        import urllib3
        from urllib3.exceptions import (
            ConnectTimeoutError,
            HTTPError,
            NewConnectionError,
            ProtocolError,
            ReadTimeoutError,
            SSLError,
        )

        total = min(self.timeout, left)
        timeout = urllib3.Timeout(total=total, connect=min(self.connect_timeout, total))
        try:
            response = self._pool.request(
                "POST",
                url,
                body=body,
                headers=headers,
                timeout=timeout,
                retries=False,
                redirect=False,
                preload_content=True,
            )
        except (ConnectTimeoutError, NewConnectionError) as exc:  # no connection: nothing was sent
            raise HttpFailure(
                SendResult.retryable("connect", f"cannot reach the provider: {type(exc).__name__}")
            ) from None
        except SSLError as exc:
            if "CERTIFICATE_VERIFY_FAILED" in str(exc):
                raise HttpFailure(SendResult.configuration("provider TLS certificate not trusted", None)) from None
            raise HttpFailure(SendResult.retryable("connect", "TLS handshake with the provider failed")) from None
        except ReadTimeoutError:  # the request went out; the answer did not come back
            raise HttpFailure(
                SendResult.ambiguous("timeout_after_send", "no answer within the timeout after the request was sent")
            ) from None
        except ProtocolError as exc:  # reset or closed mid-exchange: it may have been processed
            raise HttpFailure(
                SendResult.ambiguous("connection_reset", f"connection lost during the request: {_cause(exc)}")
            ) from None
        except HTTPError as exc:
            raise HttpFailure(SendResult.ambiguous("http_error", f"HTTP failure: {type(exc).__name__}")) from None
        return HttpAnswer(response.status, response.headers, response.data or b"")

    def close(self) -> None:
        self._pool.clear()


def _cause(exc: ProtocolError) -> str:
    inner = exc.args[1] if len(exc.args) > 1 else None
    return type(inner).__name__ if isinstance(inner, BaseException) else type(exc).__name__
