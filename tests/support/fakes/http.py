"""Local HTTP servers answering as providers do: SendGrid's v3 mail send here, Twilio's Messages and
Calls APIs in twilio.py.

Each records the requests it accepted as deliveries. Misbehaviour is scripted per request
(`server.script(Answer(...), ...)` for the next requests, in order) or per destination
(`server.by_destination[...]`): a slow answer (`delay`), a reset after accepting (`reset`:
the delivery is recorded, then the connection is closed without an answer), 429 with
Retry-After, 5xx, and the providers' error bodies. Every exchange (request as received, answer
as sent) is kept in `exchanges` for the contract tests (tests/unit/test_provider_contracts.py).
"""

from __future__ import annotations

import dataclasses
import json
import socket
import struct
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Answer:
    status: int = 0  # 0: the provider's normal success answer
    body: dict | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    reset: bool = False  # accept (record) the delivery, then drop the connection without answering
    deliver: bool | None = None  # record as delivered; default: only for success answers and resets


@dataclass
class Delivery:
    destination: str
    body: str
    request: dict
    headers: dict[str, str]


@dataclass(frozen=True)
class Exchange:
    method: str
    path: str  # with the query string, as received
    headers: dict[str, str]
    body: bytes
    status: int | None = None  # None: the connection was dropped without an answer
    response_headers: dict[str, str] = field(default_factory=dict)
    response_body: bytes = b""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


class FakeProvider:
    """Base: subclasses parse a request into (destination, body, fields) and build answers."""

    name = "provider"

    def __init__(self):
        self.deliveries: list[Delivery] = []
        self.exchanges: list[Exchange] = []
        self.requests = 0
        self.connections: set[tuple] = set()  # client (host, port) pairs seen: keep-alive reuse shows here
        self.by_destination: dict[str, Answer] = {}
        self.default_delay = 0.0
        self._script: deque[Answer] = deque()
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in two writes

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                fake._handle(self)

            def do_GET(self):
                headers = dict(self.headers.items())
                answer = fake.get(self.path, headers)
                if answer.delay:  # a slow answer: past the client's timeout, it sees none
                    time.sleep(answer.delay)
                fake._respond(self, answer, Exchange("GET", self.path, headers, b""))

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, name=f"fake-{self.name}", daemon=True
        )

    def script(self, *answers: Answer) -> None:
        with self._lock:
            self._script.extend(answers)

    def start(self):
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def destinations(self) -> list[str]:
        with self._lock:
            return [d.destination for d in self.deliveries]

    # -- request handling -----------------------------------------------------------------------------
    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length)
        if len(raw) < length:  # the client went away mid-body (a sender killed while sending): no request
            handler.close_connection = True
            return
        headers = {k: v for k, v in handler.headers.items()}
        with self._lock:
            self.requests += 1
            self.connections.add(handler.client_address)
        request = Exchange(handler.command, handler.path, headers, raw)
        denied = self.check_auth(handler.path, headers)
        if denied is not None:
            return self._respond(handler, denied, request)
        try:
            destination, body, fields = self.parse(raw)
        except (ValueError, KeyError, IndexError, TypeError, StopIteration) as exc:  # malformed: the API's 400
            return self._respond(handler, self.invalid(str(exc)), request)
        with self._lock:
            answer = self._script.popleft() if self._script else self.by_destination.get(destination) or Answer()
        success = answer.status == 0
        if answer.deliver if answer.deliver is not None else (success or answer.reset):
            with self._lock:
                self.deliveries.append(Delivery(destination, body, fields, headers))
        if answer.delay or self.default_delay:
            time.sleep(answer.delay or self.default_delay)
        if answer.reset:
            with self._lock:
                self.exchanges.append(request)
            # RST instead of FIN: the client sees a reset after its request was taken.
            handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            handler.close_connection = True
            handler.connection.close()
            return
        self._respond(handler, self.success(destination, fields) if success else answer, request)

    def _respond(self, handler: BaseHTTPRequestHandler, answer: Answer, request: Exchange) -> None:
        payload = json.dumps(answer.body).encode() if answer.body is not None else b""
        headers = {**answer.headers, **({"Content-Type": "application/json"} if payload else {})}
        with self._lock:
            self.exchanges.append(
                dataclasses.replace(request, status=answer.status, response_headers=headers, response_body=payload)
            )
        try:
            handler.send_response(answer.status)
            for name, value in headers.items():
                handler.send_header(name, value)
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
        except OSError:  # the client gave up (timed out) already
            pass

    # -- provider specifics -------------------------------------------------------------------------------
    def get(self, path: str, headers: dict[str, str]) -> Answer:
        return Answer(404, {"message": "not found"})

    def check_auth(self, path: str, headers: dict[str, str]) -> Answer | None:
        raise NotImplementedError

    def parse(self, raw: bytes) -> tuple[str, str, dict]:
        raise NotImplementedError

    def success(self, destination: str, fields: dict) -> Answer:
        raise NotImplementedError

    def invalid(self, reason: str) -> Answer:
        raise NotImplementedError


class FakeSendGrid(FakeProvider):
    """POST /v3/mail/send with `Authorization: Bearer <key>`; 202 + X-Message-Id."""

    name = "sendgrid"

    def __init__(self, api_key: str = "SG.test-key"):
        self.api_key = api_key
        super().__init__()
        self.send_url = self.url + "/v3/mail/send"

    def check_auth(self, path, headers):
        if path != "/v3/mail/send":
            return Answer(404, {"errors": [{"message": "Not found"}]})
        if headers.get("Authorization") != f"Bearer {self.api_key}":
            return Answer(
                401,
                {
                    "errors": [
                        {"field": None, "message": "The provided authorization grant is invalid, expired, or revoked"}
                    ]
                },
            )
        if headers.get("Accept", "application/json") not in ("application/json", "*/*"):
            return Answer(406, {"errors": [{"field": None, "message": "Not Acceptable"}]})
        if headers.get("Content-Type", "").split(";")[0].strip() != "application/json":
            return Answer(415, {"errors": [{"field": None, "message": "Unsupported Media Type"}]})
        return None

    def parse(self, raw):
        data = json.loads(raw)
        to = data["personalizations"][0]["to"][0]["email"]
        text = next(c["value"] for c in data["content"] if c["type"] == "text/plain")
        return to, text, data

    def success(self, destination, fields):
        return Answer(202, None, {"X-Message-Id": uuid.uuid4().hex[:22]})

    def invalid(self, reason):
        return Answer(400, {"errors": [{"field": "personalizations", "message": "malformed request"}]})
