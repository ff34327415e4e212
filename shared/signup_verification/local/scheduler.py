"""Cloud Scheduler, emulated for `verifyctl dev`: POSTs to each job's URL on its interval.

Like Cloud Scheduler it sends one POST per tick with a JSON body, on fixed ticks (every interval
from the start, like cron), and waits for the answer before the next tick of that job (no overlap:
a tick that passes while a call runs fires once when it returns); jobs run independently (a thread
each); a failed call is reported and the schedule goes on. A call that moved nothing prints nothing (an idle laptop stays quiet; the
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
        self._threads: list[threading.Thread] = []
        self._wakes: list[threading.Event] = []

    def start(self) -> Scheduler:
        # One thread per job, as Cloud Scheduler's jobs are independent: a long dispatch call of one
        # job does not hold back another job's tick (infra's dispatch relay job relies on that).
        self._threads = [
            threading.Thread(target=self._loop, args=(i, job), name=f"scheduler-{job.name}", daemon=True)
            for i, job in enumerate(self.jobs)
        ]
        self._wakes = [threading.Event() for _ in self.jobs]
        for thread in self._threads:
            thread.start()
        return self

    def run_now(self) -> None:
        """Every job runs at once (the mailbox page's "Run dispatch now" button)."""
        for wake in self._wakes:
            wake.set()

    def stop(self) -> None:
        self._stop.set()
        self.run_now()
        for thread in self._threads:
            thread.join(timeout=self.timeout_seconds)

    def _loop(self, index: int, job: Job) -> None:
        # The first tick comes one interval after start, as with a freshly created Cloud Scheduler job.
        wake = self._wakes[index]
        due = _first_tick(job, time.monotonic())
        while not self._stop.is_set():
            now = time.monotonic()
            if wake.is_set():
                wake.clear()
                due = now
            if due <= now and not self._stop.is_set():
                self.call(job)
                due = _next_tick(due, job.interval_seconds, time.monotonic())
            wake.wait(None if due == _NEVER else max(0.0, due - time.monotonic()))

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
