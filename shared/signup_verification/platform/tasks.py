"""The seam for "start more invocations of a target": each body given becomes one POST to it.

    CloudTasks   Cloud Tasks HTTP tasks (REST: POST https://cloudtasks.googleapis.com/v2/{queue}/tasks),
                 each carrying an OIDC token of a service account for the target's URL. The queue's
                 rate_limits.max_concurrent_dispatches bounds how many run at once (infra/fanout.tf,
                 infra/nudge.tf). Credentials are the instance's (google-auth's application default
                 credentials); the token is refreshed when it expires. CLOUD_TASKS_API_URL points it
                 at a stand-in of the API (the deployment rehearsal's).
    LocalTasks   the stand-in `verifyctl dev` and the tests use: POSTs to the target itself, at most
                 `concurrency` at once, the rest waiting their turn, as the queue would.

Two ways in. `start(bodies)`: anonymous tasks that run at once (the fan-out's). `enqueue(body, name,
at)`: one NAMED task that runs at `at` (epoch seconds), the create's nudge (outbox/nudge.py). Cloud
Tasks refuses a second task of a name it has seen (409 ALREADY_EXISTS, for about an hour after the
first ran), so a name created by many instances at once becomes one task; the stand-in does the same.

Neither blocks its caller on the network (the dispatch loop, a create's answer): the requests go out
on a background thread, and a failure is logged, not raised: the slot reserved for a fan-out task that
never ran stops counting at its deadline (delivery/fanout.py), and a lost nudge leaves its message to
the scheduler's next tick.
"""

from __future__ import annotations

import base64
import json
import logging
import queue
import re
import threading
import time
import urllib.error
import urllib.request
from collections import OrderedDict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from .settings import Env
from .timestamps import rfc3339

_log = logging.getLogger("signup_verification.platform.tasks")

API = "https://cloudtasks.googleapis.com/v2"
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
USER_AGENT = "signup-verification-fanout"


QUEUE = re.compile(r"^projects/[a-z0-9.:-]+/locations/[a-z0-9-]+/queues/[A-Za-z0-9-]+$")
TASK_ID = re.compile(r"^[A-Za-z0-9_-]{1,500}$")  # what Cloud Tasks accepts as a task's id
ALREADY_EXISTS = 409  # a task of that name exists, or ran within about an hour


def queue_name(raw: str, env: Env) -> str:
    """A setting's parser: `projects/P/locations/L/queues/Q`."""
    if not QUEUE.match(raw):
        raise ValueError(f"must be projects/PROJECT/locations/LOCATION/queues/QUEUE, got {raw!r}")
    return raw


def target_url(raw: str, env: Env) -> str:
    """A setting's parser: the tasks' target, https in production."""
    if not raw.startswith(("https://", "http://")):
        raise ValueError(f"must be an http(s) URL, got {raw!r}")
    if env.production and not raw.startswith("https://"):
        raise ValueError(f"must be https in production, got {raw!r}")
    return raw


class TaskStarter(Protocol):
    def start(self, bodies: Sequence[bytes]) -> None:
        """One invocation of the target per body (JSON), soon; returns at once."""

    def enqueue(self, body: bytes, name: str, at: float) -> None:
        """One invocation at `at` (epoch seconds) unless a task of `name` was enqueued; returns at once."""


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

    def task(self, body: bytes, name: str | None = None, at: float | None = None) -> dict[str, Any]:
        """The CreateTaskRequest of one invocation: named (deduplicated by Cloud Tasks) and scheduled
        when `name` and `at` are given."""
        task: dict[str, Any] = {
            "httpRequest": {
                "url": self.url,
                "httpMethod": "POST",
                "headers": {"Content-Type": "application/json", "User-Agent": USER_AGENT},
                "body": base64.b64encode(body).decode("ascii"),
                "oidcToken": {"serviceAccountEmail": self.service_account, "audience": self.url},
            },
            "dispatchDeadline": f"{self.deadline}s",
        }
        if name is not None:
            if not TASK_ID.match(name):
                raise ValueError(f"not a task id: {name!r}")
            task["name"] = f"{self.queue_name}/tasks/{name}"
        if at is not None:
            task["scheduleTime"] = rfc3339(datetime.fromtimestamp(at, UTC))
        return {"task": task}

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

    def enqueue(self, body: bytes, name: str, at: float) -> None:
        threading.Thread(target=self.create_named, args=(body, name, at), name="cloud-tasks", daemon=True).start()

    def create_named(self, body: bytes, name: str, at: float) -> bool:
        """Create the named task now: True if created, False if Cloud Tasks already had one of that
        name (ALREADY_EXISTS: another create enqueued it) or refused (logged)."""
        try:
            self._create(body, name, at)
            return True
        except TaskError as exc:
            if exc.status == ALREADY_EXISTS:
                return False
            failure: object = exc
        except Exception as exc:  # a lost nudge only leaves its message to the next tick
            failure = type(exc).__name__
        _log.warning(
            "could not enqueue a dispatch nudge: %s",
            failure,
            extra={"json_fields": {"event": "nudge_enqueue_failed", "queue": self.queue_name}},
        )
        return False

    def _create(self, body: bytes, name: str | None = None, at: float | None = None) -> None:
        request = urllib.request.Request(
            f"{self.api}/{self.queue_name}/tasks",
            data=json.dumps(self.task(body, name, at)).encode(),
            method="POST",
            headers={"Authorization": f"Bearer {self._token()}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:  # an https API URL  # nosec B310
                answer.read()
        except urllib.error.HTTPError as exc:
            raise TaskError(f"Cloud Tasks answered {exc.code}", exc.code) from None

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
    def __init__(self, message: str, status: int = 0):
        super().__init__(message)
        self.status = status


class LocalTasks:
    """POSTs each body to `url` itself, at most `concurrency` at once (a queue's max_concurrent_dispatches);
    a named task runs at its time, once per name (the last `NAMES_KEPT` names are remembered)."""

    NAMES_KEPT = 10_000

    def __init__(self, url: str, concurrency: int, timeout_seconds: float):
        self.url, self.timeout = url, timeout_seconds
        self._names: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
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

    def enqueue(self, body: bytes, name: str, at: float) -> None:
        with self._lock:
            if name in self._names:
                return
            self._names[name] = None
            if len(self._names) > self.NAMES_KEPT:
                self._names.popitem(last=False)
        timer = threading.Timer(max(0.0, at - time.time()), self._todo.put, args=(body,))
        timer.daemon = True
        timer.start()

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
