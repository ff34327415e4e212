"""What the provider-latency benchmarks share: a fake SendGrid answering every request after a fixed
latency (tests/support/fakes/http.py, the real v3 mail-send protocol, over loopback HTTP), a plain
many-threaded client POSTing to it (the yardstick: what the machine and the fake allow), and a
function target served by functions-framework's real server (functions/main.py)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import ROOT
from create_bench import request
from support.fakes.http import FakeSendGrid
from support.paths import TEST_TOKEN_KEYS

API_KEY = "SG.bench-key"


class TimedSendGrid(FakeSendGrid):
    """FakeSendGrid at a fixed latency, recording when it took each message (time.monotonic())."""

    def __init__(self, latency: float):
        super().__init__(api_key=API_KEY)
        self.default_delay = latency
        self.taken: list[float] = []
        self.httpd.request_queue_size = 1024  # a many-threaded client connects all at once
        self.httpd.handle_error = lambda request, client_address: None  # type: ignore[method-assign]

    def parse(self, raw: bytes):
        parsed = super().parse(raw)
        self.taken.append(time.monotonic())
        return parsed

    def rate(self, since: float) -> float:
        """Messages per second from `since` to the last one taken."""
        taken = [t for t in self.taken if t >= since]
        return len(taken) / (max(taken) - since) if taken else 0.0


def payload(i: int) -> bytes:
    """A mail-send body as the SendGrid adapter builds one (a link in both parts, a Message-ID)."""
    link = f"https://app.example.org/confirm?token={'x' * 65}"
    return json.dumps(
        {
            "personalizations": [{"to": [{"email": f"plain{i}@example.com"}]}],
            "from": {"email": "no-reply@example.org", "name": "Signup"},
            "subject": "Confirm your email",
            "content": [
                {"type": "text/plain", "value": f"Confirm: {link}"},
                {"type": "text/html", "value": f'<p><a href="{link}">Confirm</a></p>'},
            ],
            "headers": {"Message-ID": f"<{i}:1@example.org>"},
            "custom_args": {"intent_id": str(i), "attempt_id": f"{i}:1"},
        }
    ).encode()


def plain_client(fake: TimedSendGrid, count: int, threads: int = 64) -> float:
    """`count` mail sends from `threads` threads over pooled keep-alive connections (urllib3, as the
    adapter); emails per second handed to the fake."""
    import urllib3

    pool = urllib3.PoolManager(maxsize=threads, block=True, retries=False)
    headers = {"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json", "Accept": "application/json"}
    bodies = [payload(i) for i in range(count)]
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=threads) as workers:
        statuses = list(
            workers.map(lambda b: pool.request("POST", fake.send_url, body=b, headers=headers).status, bodies)
        )
    elapsed = time.monotonic() - started
    pool.clear()
    assert statuses.count(202) == count, statuses[:5]
    return count / elapsed


def serve(
    target: str, port: int, env: dict[str, str], log: Path | None = None, source: Path = ROOT / "functions" / "main.py"
) -> subprocess.Popen:
    """`functions-framework --target` on 127.0.0.1:port, waiting until it answers."""
    cmd = [
        str(ROOT / ".venv" / "bin" / "functions-framework"),
        *("--source", str(source), "--target", target),
        *("--host", "127.0.0.1", "--port", str(port)),
    ]
    out = open(log, "ab") if log else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, env={**os.environ, **env, "FUNCTION_TARGET": target}, stdout=out, stderr=out, cwd=ROOT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{target} exited with {proc.returncode} while starting")
        try:
            request(port, "GET", "/")
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"{target} did not start")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def service_env(database_url: str, fake: TimedSendGrid, **extra: str) -> dict[str, str]:
    """A local deployment with email through the fake SendGrid and every dispatch setting at its default."""
    env = {
        "DATABASE_URL": database_url,
        "TOKEN_KEYS": TEST_TOKEN_KEYS,
        "ENVIRONMENT": "local",
        "DEPLOYMENT": "bench",
        "EMAIL_TRANSPORT": "sendgrid",
        "SENDGRID_API_KEY": API_KEY,
        "SENDGRID_API_URL": fake.send_url,
        "EMAIL_FROM": "Signup <no-reply@example.org>",
        "SMS_TRANSPORT": "console",
        "LOG_LEVEL": "WARNING",
        "RATE_LIMIT_PER_HOUR": "1000000",
        "RATE_LIMIT_SPACING_SECONDS": "0",
        "RATE_LIMIT_ACCOUNT_PER_HOUR": "1000000",
        "RATE_LIMIT_CLIENT_PER_HOUR": "1000000",
    }
    env.update(extra)
    for name in [k for k in os.environ if k.startswith(("DISPATCH_", "SEND_", "EMAIL_MAX", "SMS_MAX"))]:
        env.setdefault(name, "")  # the defaults, whatever this shell has set
    return env


class Ticker:
    """Calls `action` every `interval` seconds on a thread until stopped."""

    def __init__(self, interval: float, action):
        self.interval, self.action = interval, action
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.action()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(5)
