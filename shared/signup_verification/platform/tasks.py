"""The seam for "start more invocations of a target": each body given becomes one POST to it.

    CloudTasks   Cloud Tasks HTTP tasks (REST: POST https://cloudtasks.googleapis.com/v2/{queue}/tasks),
                 each carrying an OIDC token of a service account for the target's URL. The queue's
                 rate_limits.max_concurrent_dispatches bounds how many run at once (infra/tasks.tf).
                 Credentials are the instance's (google-auth's application default credentials);
                 the token is refreshed when it expires.
    LocalTasks   the stand-in `verifyctl dev` and the tests use: POSTs to the target itself, at most
                 `concurrency` at once, the rest waiting their turn, as the queue would.

`start` never blocks its caller on the network (the dispatch loop is its caller): the requests go
out on a background thread, and a failure is logged, not raised: the slot reserved for a task that
never ran stops counting at its deadline (delivery/fanout.py).
"""

from __future__ import annotations

import base64
import json
import logging
import queue
import threading
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any, Protocol

_log = logging.getLogger("signup_verification.platform.tasks")

API = "https://cloudtasks.googleapis.com/v2"
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
USER_AGENT = "signup-verification-fanout"


class TaskStarter(Protocol):
    def start(self, bodies: Sequence[bytes]) -> None:
        """One invocation of the target per body (JSON), soon; returns at once."""


class CloudTasks:
    def __init__(
        self,
        queue_name: str,
        url: str,
        service_account: str,
        dispatch_deadline_seconds: float,
        *,
        api: str = API,
        credentials: Any = None,
        timeout: float = 10.0,
    ):
        self.queue_name, self.url, self.service_account = queue_name, url, service_account
        self.deadline = max(15, min(1800, int(dispatch_deadline_seconds)))  # Cloud Tasks allows 15 s to 30 min
        self.api, self.timeout = api.rstrip("/"), timeout
        self._credentials = credentials
        self._lock = threading.Lock()

    def task(self, body: bytes) -> dict[str, Any]:
        """The CreateTaskRequest of one invocation."""
        return {
            "task": {
                "httpRequest": {
                    "url": self.url,
                    "httpMethod": "POST",
                    "headers": {"Content-Type": "application/json", "User-Agent": USER_AGENT},
                    "body": base64.b64encode(body).decode("ascii"),
                    "oidcToken": {"serviceAccountEmail": self.service_account, "audience": self.url},
                },
                "dispatchDeadline": f"{self.deadline}s",
            }
        }

    def start(self, bodies: Sequence[bytes]) -> None:
        threading.Thread(target=self.create_all, args=(list(bodies),), name="cloud-tasks", daemon=True).start()

    def create_all(self, bodies: Sequence[bytes]) -> int:
        """Create one task per body now; the number created."""
        created = 0
        for body in bodies:
            try:
                self._create(body)
                created += 1
            except Exception as exc:  # a lost task only costs its slot until the slot's deadline
                _log.warning(
                    "could not enqueue a dispatch task: %s",
                    exc if isinstance(exc, TaskError) else type(exc).__name__,
                    extra={"json_fields": {"event": "fanout_enqueue_failed", "queue": self.queue_name}},
                )
        return created

    def _create(self, body: bytes) -> None:
        request = urllib.request.Request(
            f"{self.api}/{self.queue_name}/tasks",
            data=json.dumps(self.task(body)).encode(),
            method="POST",
            headers={"Authorization": f"Bearer {self._token()}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:  # an https API URL  # nosec B310
                answer.read()
        except urllib.error.HTTPError as exc:
            raise TaskError(f"Cloud Tasks answered {exc.code}") from None

    def _token(self) -> str:
        with self._lock:
            if self._credentials is None:
                import google.auth  # only where fan-out runs on Google Cloud

                self._credentials, _ = google.auth.default(scopes=[SCOPE])
            if not getattr(self._credentials, "valid", False):
                import google.auth.transport.requests

                self._credentials.refresh(google.auth.transport.requests.Request())
            return str(self._credentials.token)


class TaskError(RuntimeError):
    pass


class LocalTasks:
    """POSTs each body to `url` itself, at most `concurrency` at once (a queue's max_concurrent_dispatches)."""

    def __init__(self, url: str, concurrency: int, timeout_seconds: float):
        self.url, self.timeout = url, timeout_seconds
        self._todo: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self._workers = [
            threading.Thread(target=self._work, name=f"local-tasks-{n}", daemon=True)
            for n in range(max(1, concurrency))
        ]
        for worker in self._workers:
            worker.start()

    def start(self, bodies: Sequence[bytes]) -> None:
        for body in bodies:
            self._todo.put(body)

    def _work(self) -> None:
        while True:
            body = self._todo.get()
            request = urllib.request.Request(
                self.url,
                data=body,
                method="POST",
                headers={"Content-Type": "application/json", "User-Agent": USER_AGENT},
            )
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as answer:  # our own http:// target  # nosec B310
                    answer.read()
            except urllib.error.HTTPError as exc:
                _log.warning("a local dispatch task answered %s", exc.code)
            except OSError as exc:
                _log.warning("a local dispatch task failed: %s", type(exc).__name__)
