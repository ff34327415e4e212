"""Cloud Scheduler, emulated for `verifyctl dev`: POSTs to each job's URL on its interval.

Like Cloud Scheduler it sends one POST per tick with a JSON body, on fixed ticks (every interval
from the start, like cron), and waits for the answer before the next tick of that job (no overlap:
a tick that passes while a call runs fires once when it returns); a failed call is reported and the
schedule goes on. A call that moved nothing prints nothing (an idle laptop stays quiet; the
function's own records are DEBUG then too, platform/logs.py).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Job:
    name: str
    url: str
    interval_seconds: float  # 0: never on a schedule, only on demand (run_now)


class Scheduler:
    def __init__(self, jobs: list[Job], report: Callable[[str], None] = print, timeout_seconds: float = 120.0):
        self.jobs = jobs
        self.report = report
        self.timeout_seconds = timeout_seconds
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Scheduler:
        if self.jobs:
            self._thread = threading.Thread(target=self._loop, name="scheduler", daemon=True)
            self._thread.start()
        return self

    def run_now(self) -> None:
        """Every job runs at once (the mailbox page's "Run dispatch now" button)."""
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout_seconds)

    def _loop(self) -> None:
        # The first tick comes one interval after start, as with a freshly created Cloud Scheduler job.
        due = {job.name: _first_tick(job, time.monotonic()) for job in self.jobs}
        while not self._stop.is_set():
            now = time.monotonic()
            if self._wake.is_set():
                self._wake.clear()
                due = dict.fromkeys(due, now)
            for job in self.jobs:
                if due[job.name] <= now and not self._stop.is_set():
                    self.call(job)
                    due[job.name] = _next_tick(due[job.name], job.interval_seconds, time.monotonic())
            soonest = min(due.values())
            self._wake.wait(None if soonest == _NEVER else max(0.0, soonest - time.monotonic()))

    def call(self, job: Job) -> int | None:
        request = urllib.request.Request(
            job.url,
            data=b"{}",
            method="POST",
            headers={"Content-Type": "application/json", "User-Agent": "Google-Cloud-Scheduler (verifyctl dev)"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_seconds) as response:  # our own http:// targets  # nosec B310
                status, body = response.status, response.read(4096)
        except urllib.error.HTTPError as exc:
            status, body = exc.code, exc.read(4096)
        except OSError as exc:
            self.report(f"scheduler: {job.name} failed: {exc}")
            return None
        if status != 200 or not _idle(body):
            self.report(f"scheduler: {job.name} -> {status} {_summary(body)}")
        return status


_NEVER = float("inf")


def _first_tick(job: Job, now: float) -> float:
    return now + job.interval_seconds if job.interval_seconds > 0 else _NEVER


def _next_tick(due: float, interval: float, now: float) -> float:
    """Fixed-rate ticks, as a cron schedule fires: the next one is a whole number of intervals after
    the last, not an interval after the call returned (a dispatch that idles until near its deadline
    would otherwise leave a whole interval uncovered). Ticks missed while a call ran are not replayed."""
    if interval <= 0:
        return _NEVER
    ticks = max(1, int((now - due) // interval) + 1)
    return due + ticks * interval


def _idle(body: bytes) -> bool:
    """A dispatch report whose counts are all 0, or a reconcile report with no move, no overdue
    delivery and no backlog."""
    try:
        report = json.loads(body)
    except ValueError:
        return False
    if not isinstance(report, dict) or report.get("skipped"):
        return False
    if "moves" in report:
        return (
            not any(report["moves"].values())
            and report.get("drained", True)
            and not any(o.get("count") for o in (report.get("overdue") or {}).values())
            and not (report.get("watermark") or {}).get("backlog")
        )
    return all(v == 0 for k, v in report.items() if k != "elapsed_ms" and isinstance(v, int))


def _summary(body: bytes) -> str:
    try:
        return json.dumps(json.loads(body), separators=(",", ":"))[:300]
    except ValueError:
        return body.decode("utf-8", "replace")[:300]
