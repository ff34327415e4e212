"""The plan's Cloud Run services, started from the rehearsal's image the way Cloud Run starts them
(the rehearsal's, tools/rehearse_deploy.py): the image's web process in the application directory,
the service's planned environment with its secrets' values injected, PORT, K_SERVICE, K_REVISION and
K_CONFIGURATION; ready once it accepts connections on PORT (Cloud Run's default startup probe);
SIGTERM, then SIGKILL after the grace period, to stop. Each instance's output goes to its own log file.

A service gets as many instances as asked (at most its max_instances); a request goes to an
instance with no request in flight, and waits for one when all are busy: Cloud Run's routing at
concurrency 1 (every service's, infra/locals.tf), which a dispatch tick and its relay need.
"""

from __future__ import annotations

import http.client
import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from rehearsal_image import Image  # noqa: E402
from rehearsal_plan import Container  # noqa: E402
from support.fakes.smtp import free_port  # noqa: E402

STOP_GRACE_SECONDS = 10  # Cloud Run's SIGTERM-to-SIGKILL grace
START_TIMEOUT_SECONDS = 60
_DENIED = re.compile(r"permission denied for [a-z ]*?\S+")
# A record the platform would show as an error (Cloud Logging's severities), or a bare traceback.
_ERROR = re.compile(r'"severity": "(ERROR|CRITICAL|ALERT|EMERGENCY)"|^Traceback', re.MULTILINE)


class ServiceError(RuntimeError):
    """A service did not start, answered wrongly or lacked a privilege; one line naming it."""


@dataclass
class Service:
    container: Container
    port: int
    log: Path
    process: subprocess.Popen
    requests: list[str] = field(default_factory=list)
    busy: bool = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def tail(self, lines: int = 1) -> str:
        text = self.log.read_text(errors="replace").strip() if self.log.exists() else ""
        return " | ".join(text.splitlines()[-lines:]) or "(no output)"

    def denied(self) -> str | None:
        """The first privilege the service was refused, as PostgreSQL named it."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        found = _DENIED.search(text)
        return found.group(0) if found else None

    def error_record(self) -> str | None:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        found = _ERROR.search(text)
        if found is None:
            return None
        line = text[found.start() :].splitlines()[0]
        message = re.search(r'"message": "([^"]*)"', line)
        return message.group(1) if message else line[:200]

    def failure(self, what: str) -> ServiceError:
        settle([self])
        denied = self.denied()
        db_user = self.container.env.get("DB_USER", "?")
        cause = f"{denied} (as database user {db_user})" if denied else self.tail()
        return ServiceError(f"{self.container.label()}: {what}: {cause}")


def settle(instances: list[Service], seconds: float = 5.0) -> None:
    """Wait until their logs stop growing: an instance writes a request's records after its response
    (platform/log_handoff.py keeps them off the first answer's path)."""
    deadline, sizes, quiet_since = time.monotonic() + seconds, [-1] * len(instances), time.monotonic()
    while time.monotonic() < deadline:
        now = [s.log.stat().st_size if s.log.exists() else 0 for s in instances]
        if now != sizes:
            sizes, quiet_since = now, time.monotonic()
        elif all(sizes) and time.monotonic() - quiet_since > 0.5:
            return
        time.sleep(0.1)


class Services:
    """Started together, stopped together."""

    def __init__(self, image: Image, logs: Path):
        self.image = image
        self.logs = logs
        self.running: dict[str, list[Service]] = {}
        self._free = threading.Condition()

    def start(
        self, containers: list[Container], settings: dict[str, dict[str, str]], instances: dict[str, int] | None = None
    ) -> None:
        """Start each container with `settings[key]` (its environment); wait until every instance listens."""
        self.logs.mkdir(parents=True, exist_ok=True)
        for container in containers:
            count = (instances or {}).get(container.key, 1)
            if count > container.max_instances:
                raise ServiceError(
                    f"{container.label()}: {count} instances asked for, max_instances is {container.max_instances}"
                )
            for n in range(count):
                port, log = free_port(), self.logs / f"{container.name}-{n}.log"
                env = self.image.environment(
                    {
                        **settings[container.key],
                        "PORT": str(port),
                        "K_SERVICE": container.name,
                        "K_REVISION": f"{container.name}-00001-rhs",
                        "K_CONFIGURATION": container.name,
                    }
                )
                with log.open("wb") as out:
                    process = subprocess.Popen(
                        self.image.argv(container), cwd=self.image.app, env=env, stdout=out, stderr=subprocess.STDOUT
                    )
                self.running.setdefault(container.key, []).append(Service(container, port, log, process))
        self._wait_listening()

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        waiting = [service for instances in self.running.values() for service in instances]
        while waiting:
            for service in list(waiting):
                if service.process.poll() is not None:
                    raise service.failure(f"did not start (exit {service.process.returncode})")
                try:
                    socket.create_connection(("127.0.0.1", service.port), timeout=0.2).close()
                    waiting.remove(service)
                except OSError:
                    pass
            if waiting and time.monotonic() > deadline:
                raise waiting[0].failure(f"did not listen on PORT within {START_TIMEOUT_SECONDS} s")
            time.sleep(0.1)

    def __getitem__(self, key: str) -> Service:
        return self.running[key][0]

    def _take(self, key: str) -> Service:
        with self._free:
            while True:
                for service in self.running[key]:
                    if not service.busy:
                        service.busy = True
                        return service
                self._free.wait()

    def _give_back(self, service: Service) -> None:
        with self._free:
            service.busy = False
            self._free.notify_all()

    def call(
        self,
        key: str,
        method: str,
        path: str,
        *,
        body: Any = None,
        form: bytes | None = None,
        headers: dict[str, str] | None = None,
        expect: int = 200,
        timeout: float = 60,
    ) -> tuple[int, Any]:
        """One request to a free instance; anything but `expect` is a ServiceError naming the service and the request."""
        service = self._take(key)
        try:
            status, raw = self._send(service, method, path, body, form, headers, timeout)
        finally:
            self._give_back(service)
        try:
            answer: Any = json.loads(raw) if raw else None
        except ValueError:
            answer = raw.decode(errors="replace")
        if status != expect:
            detail = (answer.get("title") or answer.get("detail")) if isinstance(answer, dict) else str(answer)[:80]
            raise service.failure(f"{method} {path} answered {status} ({detail}), not {expect}")
        return status, answer

    @staticmethod
    def _send(
        service: Service,
        method: str,
        path: str,
        body: Any,
        form: bytes | None,
        headers: dict[str, str] | None,
        timeout: float,
    ) -> tuple[int, bytes]:
        data = form if form is not None else (None if body is None else json.dumps(body).encode())
        sent = {**({"Content-Type": "application/json"} if body is not None else {}), **(headers or {})}
        service.requests.append(f"{method} {path}")
        connection = http.client.HTTPConnection("127.0.0.1", service.port, timeout=timeout)
        try:
            connection.request(method, path, body=data, headers=sent)
            response = connection.getresponse()
            return response.status, response.read()
        except OSError as exc:
            raise service.failure(f"{method} {path}: no answer ({exc})") from exc
        finally:
            connection.close()

    def _all(self) -> list[Service]:
        return [service for instances in self.running.values() for service in instances]

    def privilege_failures(self) -> list[str]:
        """One line per service instance whose log shows a privilege the database refused it."""
        settle(self._all())
        return [
            f"{s.container.label()}: {s.denied()} (as database user {s.container.env.get('DB_USER', '?')})"
            for s in self._all()
            if s.denied()
        ]

    def error_records(self) -> list[str]:
        """One line per service instance that logged an error."""
        return [f"{s.container.label()}: logged an error: {s.error_record()}" for s in self._all() if s.error_record()]

    def stop(self) -> list[str]:
        """SIGTERM every instance, SIGKILL what outlives the grace; one line per instance that had to be killed."""
        for service in self._all():
            if service.process.poll() is None:
                service.process.send_signal(signal.SIGTERM)
        killed = []
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for service in self._all():
            try:
                service.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                service.process.kill()
                service.process.wait(timeout=30)
                killed.append(f"{service.container.label()}: still running {STOP_GRACE_SECONDS} s after SIGTERM")
        return killed
