"""A local stand-in of the Cloud Tasks API (Google's cannot be reached here), as far as the service
uses it: CreateTask (`POST /v2/{queue}/tasks`), with the name rule that makes a named task one task
(a second CreateTask of a name answers 409 ALREADY_EXISTS, as Cloud Tasks does for about an hour
after the first ran) and, with `deliver=True`, the delivery: at its scheduleTime each task's HTTP
request goes to its target carrying an identity token of the task's OIDC service account, one at a
time (a queue at max_concurrent_dispatches 1), the way Cloud Run passes a caller on. It also answers
Google's OAuth token endpoint (`POST /token`), so google-auth's service-account credentials can be
pointed at it from a key file whose token_uri names it (the deployment rehearsal's processes).
"""

from __future__ import annotations

import base64
import json
import queue
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from support.auth import cloud_run_identity


class TasksApi:
    def __init__(self, deliver: bool = False, routes: dict[str, str] | None = None):
        self.tasks: dict[str, dict[str, Any]] = {}  # by full name (named tasks only)
        self.created: list[dict[str, Any]] = []  # every task created, in order
        self.refused: list[str] = []  # names refused as existing
        self.delivered: list[tuple[str, int]] = []  # (task name or "", the target's answer status)
        self.bearer: list[str] = []  # the Authorization headers CreateTask came with
        self._deliver = deliver
        self.routes = routes or {}  # a task's target URL -> where it is served here (Cloud Run's routing)
        self._due: queue.PriorityQueue[tuple[float, int, dict[str, Any]]] = queue.PriorityQueue()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path == "/token":
                    self._answer(200, {"access_token": "stand-in-token", "expires_in": 3600, "token_type": "Bearer"})
                    return
                if not (self.path.startswith("/v2/projects/") and self.path.endswith("/tasks")):
                    self._answer(404, {"error": {"code": 404, "status": "NOT_FOUND"}})
                    return
                self._answer(
                    *api.create(self.path[len("/v2/") : -len("/tasks")], raw, self.headers.get("Authorization"))
                )

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v2"
        self.token_uri = f"http://127.0.0.1:{self.httpd.server_address[1]}/token"
        self._threads = [threading.Thread(target=self.httpd.serve_forever, daemon=True)]
        if deliver:
            self._threads.append(threading.Thread(target=self._deliveries, daemon=True))

    def create(self, queue_name: str, raw: bytes, authorization: str | None) -> tuple[int, dict[str, Any]]:
        try:
            task = json.loads(raw)["task"]
            request = task["httpRequest"]
        except (ValueError, KeyError, TypeError):
            return 400, {"error": {"code": 400, "status": "INVALID_ARGUMENT"}}
        if not (authorization or "").startswith("Bearer "):
            return 401, {"error": {"code": 401, "status": "UNAUTHENTICATED"}}
        name = task.get("name")
        if name is not None and not name.startswith(f"{queue_name}/tasks/"):
            return 400, {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": "name not in queue"}}
        with self._lock:
            self.bearer.append(authorization or "")
            if name is not None and name in self.tasks:
                self.refused.append(name)
                return 409, {
                    "error": {"code": 409, "status": "ALREADY_EXISTS", "message": "Requested entity already exists"}
                }
            if name is not None:
                self.tasks[name] = task
            self.created.append(task)
        at = task.get("scheduleTime")
        due = datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp() if at else time.time()
        self._due.put((due, len(self.created), task))
        return 200, {**task, "name": name or f"{queue_name}/tasks/{len(self.created)}", "httpRequest": request}

    def _deliveries(self) -> None:
        while not self._stop.is_set():
            try:
                due, _, task = self._due.get(timeout=0.1)
            except queue.Empty:
                continue
            wait = due - time.time()
            if wait > 0 and self._stop.wait(wait):
                return
            request = task["httpRequest"]
            headers = dict(request.get("headers") or {})
            identity = (request.get("oidcToken") or {}).get("serviceAccountEmail")
            if identity:
                headers["Authorization"] = cloud_run_identity(identity)
            url = request["url"]
            for planned, served in self.routes.items():
                if url.startswith(planned):
                    url = served + url[len(planned) :]
            call = urllib.request.Request(
                url, data=base64.b64decode(request.get("body") or ""), method="POST", headers=headers
            )
            try:
                with urllib.request.urlopen(call, timeout=120) as answer:  # loopback targets  # nosec B310
                    answer.read()
                    status = answer.status
            except urllib.error.HTTPError as exc:
                status = exc.code
            except OSError:
                status = 0
            with self._lock:
                self.delivered.append((task.get("name", ""), status))

    def __enter__(self) -> TasksApi:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
