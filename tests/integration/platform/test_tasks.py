"""The seam that starts more dispatch invocations (platform/tasks.py): the Cloud Tasks client speaks
the REST API's CreateTask (checked against a local stand-in of the API: Google's cannot be reached
here), and the local stand-in POSTs to the target itself, never more at once than its bound."""

from __future__ import annotations

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from google.oauth2.credentials import Credentials

from signup_verification.delivery import fanout
from signup_verification.delivery.capacity_config import FanoutConfig
from signup_verification.platform.tasks import CloudTasks, LocalTasks
from support.waiting import until

QUEUE = "projects/p-1/locations/europe-west1/queues/verify-dispatch-fanout"
TARGET = "https://verify-dispatch-123.europe-west1.run.app"
ACCOUNT = "verify-fanout@p-1.iam.gserviceaccount.com"


class Recorder:
    """A loopback HTTP server recording each POST; answers `status` after `delay` seconds."""

    def __init__(self, status: int = 200, delay: float = 0.0):
        self.requests: list[tuple[str, dict, bytes]] = []
        self.status, self.delay = status, delay
        self.active = self.most_active = 0
        self._lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with recorder._lock:
                    recorder.requests.append((self.path, dict(self.headers.items()), body))
                    recorder.active += 1
                    recorder.most_active = max(recorder.most_active, recorder.active)
                time.sleep(recorder.delay)
                with recorder._lock:
                    recorder.active -= 1
                answer = json.dumps({"name": f"{QUEUE}/tasks/1"}).encode()
                self.send_response(recorder.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True).start()

    def wait_for(self, count: int, timeout: float = 10.0) -> None:
        until(lambda: len(self.requests) >= count, timeout, what=f"{count} posts")

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def recorder():
    server = Recorder()
    yield server
    server.stop()


def test_cloud_tasks_creates_one_http_task_per_invocation_with_an_oidc_token_for_the_target(recorder):
    tasks = CloudTasks(QUEUE, TARGET, ACCOUNT, 85, api=recorder.url + "/v2", credentials=Credentials("access-1"))
    bodies = [b'{"fanout": {"slot": "a"}}', b'{"fanout": {"slot": "b"}}']
    assert tasks.create_all(bodies) == 2
    for (path, headers, raw), body in zip(recorder.requests, bodies, strict=True):
        assert path == f"/v2/{QUEUE}/tasks"
        assert headers["Authorization"] == "Bearer access-1" and headers["Content-Type"] == "application/json"
        task = json.loads(raw)["task"]
        http = task["httpRequest"]
        assert (http["url"], http["httpMethod"]) == (TARGET, "POST")
        assert http["oidcToken"] == {"serviceAccountEmail": ACCOUNT, "audience": TARGET}
        assert http["headers"]["Content-Type"] == "application/json"
        assert base64.b64decode(http["body"]) == body
        assert task["dispatchDeadline"] == "85s"


def test_cloud_tasks_bounds_the_dispatch_deadline_to_what_the_api_allows():
    assert CloudTasks(QUEUE, TARGET, ACCOUNT, 3600).task(b"{}")["task"]["dispatchDeadline"] == "1800s"
    assert CloudTasks(QUEUE, TARGET, ACCOUNT, 5).task(b"{}")["task"]["dispatchDeadline"] == "15s"


def test_a_refused_task_is_logged_not_raised(caplog):
    refusing = Recorder(status=403)
    try:
        tasks = CloudTasks(QUEUE, TARGET, ACCOUNT, 85, api=refusing.url + "/v2", credentials=Credentials("t"))
        assert tasks.create_all([b"{}"]) == 0
    finally:
        refusing.stop()
    [record] = [r for r in caplog.records if getattr(r, "json_fields", {}).get("event") == "fanout_enqueue_failed"]
    assert "403" in record.getMessage() and "Bearer" not in record.getMessage()


def test_the_local_stand_in_posts_to_the_target_at_most_its_bound_at_once():
    slow = Recorder(delay=0.3)
    try:
        LocalTasks(slow.url + "/", concurrency=2, timeout_seconds=10).start(
            [f'{{"n": {n}}}'.encode() for n in range(5)]
        )
        slow.wait_for(5)
        until(lambda: slow.active == 0, what="every post answered")
    finally:
        slow.stop()
    assert sorted(json.loads(body)["n"] for _, _, body in slow.requests) == [0, 1, 2, 3, 4]
    assert slow.most_active == 2
    assert all(headers["Content-Type"] == "application/json" for _, headers, _ in slow.requests)


def test_the_instance_builds_the_seam_its_settings_name():
    fanout.starter.cache_clear()
    assert fanout.starter(FanoutConfig(), 60) is None  # no target: no fan-out
    assert fanout.starter(FanoutConfig(url=TARGET, max_parallel=0), 60) is None
    cloud = fanout.starter(FanoutConfig(url=TARGET, queue=QUEUE, service_account=ACCOUNT), 75)
    assert isinstance(cloud, CloudTasks) and cloud.deadline == 85
    assert isinstance(fanout.starter(FanoutConfig(url="http://127.0.0.1:9/"), 60), LocalTasks)


def test_a_named_task_carries_its_name_in_the_queue_and_its_schedule_time(recorder):
    tasks = CloudTasks(QUEUE, TARGET, ACCOUNT, 1800, api=recorder.url + "/v2", credentials=Credentials("t"))
    assert tasks.create_named(b'{"nudge": {"bucket": 7}}', "nudge-ab12cd34-7", 1_700_000_000.5) is True
    [(_, _, raw)] = recorder.requests
    task = json.loads(raw)["task"]
    assert task["name"] == f"{QUEUE}/tasks/nudge-ab12cd34-7"
    assert task["scheduleTime"] == "2023-11-14T22:13:20.500Z"
    assert task["dispatchDeadline"] == "1800s"
    with pytest.raises(ValueError):
        tasks.task(b"{}", "not a task id/../x", 0)


def test_a_name_cloud_tasks_already_has_is_no_failure(caplog):
    existing = Recorder(status=409)
    try:
        tasks = CloudTasks(QUEUE, TARGET, ACCOUNT, 85, api=existing.url + "/v2", credentials=Credentials("t"))
        assert tasks.create_named(b"{}", "nudge-1", time.time()) is False
    finally:
        existing.stop()
    assert not [r for r in caplog.records if getattr(r, "json_fields", {}).get("event") == "nudge_enqueue_failed"]
    refusing = Recorder(status=403)
    try:
        tasks = CloudTasks(QUEUE, TARGET, ACCOUNT, 85, api=refusing.url + "/v2", credentials=Credentials("t"))
        assert tasks.create_named(b"{}", "nudge-2", time.time()) is False
    finally:
        refusing.stop()
    [record] = [r for r in caplog.records if getattr(r, "json_fields", {}).get("event") == "nudge_enqueue_failed"]
    assert "403" in record.getMessage()


def test_the_local_stand_in_runs_a_named_task_once_at_its_time(recorder):
    tasks = LocalTasks(recorder.url + "/", concurrency=1, timeout_seconds=10)
    at = time.time() + 0.4
    for _ in range(3):
        tasks.enqueue(b'{"nudge": {"bucket": 1}}', "nudge-1", at)  # three creates, one name
    tasks.enqueue(b'{"nudge": {"bucket": 2}}', "nudge-2", at)
    time.sleep(0.2)
    assert recorder.requests == []  # not before its time
    recorder.wait_for(2)
    time.sleep(0.2)
    assert sorted(json.loads(body)["nudge"]["bucket"] for _, _, body in recorder.requests) == [1, 2]
    assert time.time() >= at
