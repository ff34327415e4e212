"""The local scheduler of `verifyctl dev` (local/scheduler.py), as Cloud Scheduler is in production:
each job POSTs `{}` on its interval, independently of the others; a tick that did nothing prints
nothing; an interval of 0 runs a job only on demand (the mailbox's Run now button, `run_now`)."""

from __future__ import annotations

import threading
import time

import pytest
from werkzeug.serving import make_server

from signup_verification.local.scheduler import Job, Scheduler
from support.waiting import until


@pytest.fixture
def scheduled_endpoint(request):
    hits: list[tuple[str, bytes]] = []
    answer = getattr(request, "param", b'{"claimed": 1, "elapsed_ms": 3}')

    def app(environ, start_response):
        hits.append((environ["REQUEST_METHOD"], environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))))
        start_response("200 OK", [("Content-Type", "application/json")])
        return [answer]

    http = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=http.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{http.server_port}/", hits
    http.shutdown()


def test_scheduler_posts_json_on_its_interval(scheduled_endpoint):
    url, hits = scheduled_endpoint
    lines: list[str] = []
    scheduler = Scheduler([Job("dispatch", url, 0.3)], report=lines.append).start()
    try:
        until(lambda: len(hits) >= 2)
        assert hits[:2] == [("POST", b"{}"), ("POST", b"{}")]
        assert lines[0] == 'scheduler: dispatch -> 200 {"claimed":1,"elapsed_ms":3}'
    finally:
        scheduler.stop()


@pytest.mark.parametrize(
    "scheduled_endpoint",
    [
        b'{"claimed": 0, "accepted": 0, "elapsed_ms": 4}',
        b'{"deployment": "local", "moves": {"claims_expired": 0}, "overdue": {"email": {"count": 0}}, "drained": true,'
        b' "watermark": {"backlog": []}, "elapsed_ms": 9}',
    ],
    indirect=True,
)
def test_an_idle_tick_prints_nothing(scheduled_endpoint):
    url, hits = scheduled_endpoint
    lines: list[str] = []
    scheduler = Scheduler([Job("dispatch", url, 0.2)], report=lines.append).start()
    try:
        until(lambda: len(hits) >= 2)
        assert len(hits) >= 2 and lines == []
    finally:
        scheduler.stop()


def test_without_a_schedule_jobs_run_only_on_demand(scheduled_endpoint):
    """`verifyctl dev --no-scheduler`: interval 0, and the mailbox's button still runs both once."""
    url, hits = scheduled_endpoint
    scheduler = Scheduler([Job("dispatch", url, 0), Job("reconcile", url, 0)], report=lambda line: None).start()
    try:
        time.sleep(0.3)
        assert hits == []
        scheduler.run_now()
        until(lambda: len(hits) >= 2)
        time.sleep(0.3)
        assert len(hits) == 2  # once each, no schedule after it
    finally:
        scheduler.stop()


def test_scheduler_runs_now_on_demand(scheduled_endpoint):
    url, hits = scheduled_endpoint
    scheduler = Scheduler([Job("dispatch", url, 3600), Job("reconcile", url, 3600)], report=lambda line: None).start()
    try:
        time.sleep(0.2)
        assert hits == []  # the first tick is one interval away
        scheduler.run_now()
        until(lambda: len(hits) >= 2)
        assert len(hits) == 2
    finally:
        scheduler.stop()


def test_a_long_call_of_one_job_does_not_hold_back_another_job():
    """Jobs are independent, as Cloud Scheduler's: infra's second dispatch job (the relay) must fire
    while the first job's invocation still waits for work past the tick (outbox/idle.py)."""
    calls: list[tuple[str, float]] = []

    def app(environ, start_response):
        calls.append((environ["PATH_INFO"], time.monotonic()))
        if environ["PATH_INFO"] == "/slow":
            time.sleep(1.5)  # the first job's invocation outlives several of its ticks
        start_response("200 OK", [("Content-Type", "application/json")])
        return [b'{"claimed": 0, "elapsed_ms": 1}']

    http = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=http.serve_forever, args=(0.05,), daemon=True).start()
    base = f"http://127.0.0.1:{http.server_port}"
    scheduler = Scheduler(
        [Job("dispatch", base + "/slow", 0.2), Job("dispatch-relay", base + "/fast", 0.2)], report=lambda line: None
    ).start()
    try:
        until(lambda: sum(path == "/fast" for path, _ in calls) >= 3, what="the other job's ticks")
        slow = [t for path, t in calls if path == "/slow"]
        fast = [t for path, t in calls if path == "/fast"]
        assert len(slow) == 1  # its next call waits for this one (no overlap within a job)
        assert fast[2] < slow[0] + 1.5  # the other job kept its ticks while that call ran
    finally:
        scheduler.stop()
        http.shutdown()
