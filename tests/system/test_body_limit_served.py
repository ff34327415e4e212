"""The edge through functions-framework's own server (gunicorn, keep-alive, its drain after each
answer), as it serves every target in the image (platform/serving.py): a body of MAX_BODY_BYTES or
more, declared or chunked, is answered 413 problem+json before any handler runs; nothing is created,
consumed or run; no 5xx follows on the same connection; a body that ends before its Content-Length
is a 400, never acted on. A 2 MB request line is a 414, over-large headers a 431, a head that does
not arrive in time a 408 and a body that trickles a 400, each before any target code runs, and the
threads they held serve others again."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest

from signup_verification.config import load
from signup_verification.platform.database import Database
from signup_verification.verifications.tokens import Keyring
from support.gunicorn_served import Served, functions_framework
from support.paths import TEST_TOKEN_KEYS
from support.raw_http import Answer, Connection, request_bytes

TARGETS = ["create_verification", "confirm_verification", "dispatch", "reconcile", "status", "delivery_reports"]
ENV = {
    "TOKEN_KEYS": TEST_TOKEN_KEYS,
    "DEPLOYMENT": "edge-test",
    "EMAIL_TRANSPORT": "console",
    "SMS_TRANSPORT": "console",
    "DISPATCH_IDLE_WAIT": "0",
    "RATE_LIMIT_SPACING_SECONDS": "0",
    "DELIVERY_REPORTS_MAX_BODY_BYTES": "32768",  # its own limit, unlike the others'
    "HTTP_READ_TIMEOUT_SECONDS": "2",  # the slow clients below wait this long, not the default 10 s
    "LOG_FORMAT": "text",
}
LIMIT = load(ENV).http.max_body_bytes
LIMITS = {target: LIMIT for target in TARGETS} | {"delivery_reports": load(ENV).reports.max_body_bytes}
JSON = {"Content-Type": "application/json"}
# What the database holds that any target could change; compared around every refused request.
STATE = (
    "SELECT (SELECT count(*) FROM verifications), (SELECT count(*) FROM delivery_intents),"
    " (SELECT count(*) FROM delivery_attempts), (SELECT count(*) FROM idempotency_keys),"
    " (SELECT count(*) FROM delivery_observations), (SELECT count(*) FROM signature_replay),"
    " (SELECT count(*) FILTER (WHERE status <> 'pending') FROM verifications),"
    " (SELECT coalesce(jsonb_agg(to_jsonb(h) ORDER BY h.name), '[]'::jsonb)::text FROM worker_heartbeats h)"
)


@pytest.fixture(scope="module")
def served(module_database_url, tmp_path_factory):
    env = {**ENV, "DATABASE_URL": module_database_url, "VERIFY_LOCAL_DIR": str(tmp_path_factory.mktemp("local"))}
    with functions_framework(TARGETS, env, tmp_path_factory.mktemp("logs")) as servers:
        yield servers
    for target in TARGETS:  # neither a drain failure nor anything else raised in any server
        assert "Traceback" not in servers.output(target), servers.output(target)[-3000:]


@pytest.fixture(scope="module")
def mdb(module_database_url):
    database = Database.from_url(module_database_url)
    yield database
    database.close()


def _create_body(**fields: str) -> bytes:
    unique = uuid.uuid4().hex[:12]
    data = {"account_id": f"acct-{unique}", "channel": "email", "destination": f"u{unique}@example.com", **fields}
    return json.dumps(data).encode()


def padded(data: bytes, size: int) -> bytes:
    """Valid JSON of exactly `size` bytes: trailing whitespace, which JSON ignores."""
    assert len(data) <= size
    return data + b" " * (size - len(data))


def _request(target: str, body: bytes, **framing) -> bytes:
    """The target's own request with `body`: what a caller of that target would send."""
    if target == "create_verification":
        return request_bytes("POST", "/", {**JSON, "Idempotency-Key": uuid.uuid4().hex}, body, **framing)
    if target == "status":
        return request_bytes("GET", "/", {}, body, **framing)
    path = "/sendgrid" if target == "delivery_reports" else "/"
    return request_bytes("POST", path, JSON, body, **framing)


def _ordinary(target: str) -> bytes:
    """A small, valid request for the target (the one after a refusal on the same connection)."""
    if target == "create_verification":
        return _request(target, _create_body())
    if target == "confirm_verification":
        return request_bytes("GET", "/", {})
    return _request(target, b"[]" if target == "delivery_reports" else b"")


def _body_for(target: str, size: int) -> bytes:
    data = _create_body() if target == "create_verification" else b"[]" if target == "delivery_reports" else b"{}"
    return padded(data, size)


def _refused(answer: Answer | None, status: int = 413) -> None:
    assert answer is not None, "the server closed the connection without an answer"
    assert answer.status == status and answer.mimetype == "application/problem+json", (answer.status, answer.body)
    assert answer.json()["status"] == status


def _next_on_same_connection(connection: Connection, target: str) -> None:
    """No 5xx follows on the connection: the next request is answered as usual, or the server closed it."""
    follow = connection.exchange(_ordinary(target))
    assert follow is None or follow.status < 500, (follow.status, follow.body)


SHAPES = {
    "exact limit": lambda target, limit: (_body_for(target, limit), {}),
    "limit + 1": lambda target, limit: (_body_for(target, limit + 1), {}),
    "chunked at the limit": lambda target, limit: (_body_for(target, limit), {"chunked": True}),
    "chunked over the limit": lambda target, limit: (_body_for(target, limit + 5000), {"chunked": True}),
}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("target", TARGETS)
def test_a_body_at_or_over_the_limit_is_refused_before_any_handler(served: Served, mdb, target, shape):
    body, framing = SHAPES[shape](target, LIMITS[target])
    before = mdb.run(STATE)
    with Connection(served.urls[target]) as connection:
        _refused(connection.exchange(_request(target, body, **framing)))
        assert mdb.run(STATE) == before  # nothing created, consumed, claimed or run
        _next_on_same_connection(connection, target)


@pytest.mark.parametrize("chunked", [False, True], ids=["declared", "chunked"])
@pytest.mark.parametrize("target", TARGETS)
def test_a_body_one_byte_under_the_limit_reaches_the_handler(served: Served, target, chunked):
    with Connection(served.urls[target]) as connection:
        answer = connection.exchange(_request(target, _body_for(target, LIMITS[target] - 1), chunked=chunked))
        assert answer is not None and answer.status != 413 and answer.status < 500, (answer.status, answer.body)
        if target == "create_verification":
            assert answer.status == 201
        _next_on_same_connection(connection, target)


@pytest.mark.parametrize("target", TARGETS)
def test_a_declared_length_at_the_limit_is_refused_unread(served: Served, mdb, target):
    """Content-Length at the limit, a few bytes sent and the rest withheld: the 413 comes at once."""
    before = mdb.run(STATE)
    with Connection(served.urls[target], timeout=5) as connection:
        head = _request(target, b"", content_length=LIMITS[target])
        _refused(connection.exchange(head + b"{" * 100))
    assert mdb.run(STATE) == before


@pytest.mark.parametrize("target", TARGETS)
def test_a_body_shorter_than_its_content_length_is_400_and_acted_on_never(served: Served, mdb, target):
    before = mdb.run(STATE)
    with Connection(served.urls[target]) as connection:
        body = _body_for(target, 200)
        connection.send(_request(target, body, content_length=len(body) + 50))
        connection.finish_sending()  # the client is done: the body ends 50 bytes early
        _refused(connection.answer(), 400)
    assert mdb.run(STATE) == before


@pytest.mark.parametrize("target", TARGETS)
def test_a_content_length_shorter_than_the_body_frames_the_request(served: Served, mdb, target):
    """Content-Length says 40, the limit + 1 bytes follow: the request is its first 40 bytes
    (truncated JSON, never created), the rest is not a request, and nothing answers 5xx."""
    body = _body_for(target, LIMITS[target] + 1)
    before = mdb.run("SELECT count(*) FROM verifications")
    with Connection(served.urls[target]) as connection:
        answers = [connection.exchange(_request(target, body, content_length=40))]
        connection.finish_sending()
        while (answer := connection.answer()) is not None:  # whatever the server makes of the rest
            answers.append(answer)
    assert answers[0] is not None
    assert all(a.status < 500 for a in answers if a is not None), [(a.status, a.body) for a in answers if a]
    if target == "create_verification":
        assert answers[0].status == 400
    assert mdb.run("SELECT count(*) FROM verifications") == before


# -- the reproductions ---------------------------------------------------------------------------------
def test_a_create_body_of_exactly_16384_bytes_creates_nothing_and_its_key_replays_nothing(served: Served, mdb):
    assert LIMIT == 16_384
    data, key = _create_body(), "exact-limit-key"
    account = json.loads(data)["account_id"]
    exact = request_bytes("POST", "/", {**JSON, "Idempotency-Key": key}, padded(data, 16_384))
    with Connection(served.urls["create_verification"]) as connection:
        _refused(connection.exchange(exact))
        _refused(connection.exchange(exact))  # the same key again: still refused, not a replayed 201
    assert mdb.run("SELECT count(*) FROM verifications WHERE account_id = :a", a=account) == [[0]]
    assert mdb.run("SELECT count(*) FROM idempotency_keys WHERE key = :k", k=key) == [[0]]
    # The key was never used: a body within the limit under it creates (its first, not a replay).
    with Connection(served.urls["create_verification"]) as connection:
        created = connection.exchange(request_bytes("POST", "/", {**JSON, "Idempotency-Key": key}, data))
    assert created is not None and created.status == 201
    assert mdb.run("SELECT count(*) FROM verifications WHERE account_id = :a", a=account) == [[1]]


def test_a_confirm_body_of_16384_bytes_does_not_consume_the_token(served: Served, mdb):
    with Connection(served.urls["create_verification"]) as connection:
        created = connection.exchange(_request("create_verification", _create_body()))
    assert created is not None and created.status == 201
    row = mdb.one("SELECT * FROM verifications WHERE id = :v", v=uuid.UUID(created.json()["verification_id"]))
    token = Keyring.parse(TEST_TOKEN_KEYS).get(row["key_id"]).link(row["id"], bytes(row["token_nonce"]))
    confirm = json.dumps({"token": token}).encode()
    with Connection(served.urls["confirm_verification"]) as connection:
        _refused(connection.exchange(request_bytes("POST", "/", JSON, padded(confirm, 16_384))))
        assert mdb.one("SELECT status FROM verifications WHERE id = :v", v=row["id"])["status"] == "pending"
        confirmed = connection.exchange(request_bytes("POST", "/", JSON, confirm))
    assert confirmed is not None and confirmed.status == 200
    assert confirmed.json()["already_verified"] is False  # this, not the refused body, consumed it


def test_a_chunked_body_over_the_limit_is_refused_not_cut_and_processed(served: Served, mdb):
    """Its first 16,384 bytes alone are a valid create: a service acting on them would create."""
    data = _create_body()
    account = json.loads(data)["account_id"]
    with Connection(served.urls["create_verification"]) as connection:
        _refused(connection.exchange(_request("create_verification", padded(data, 20_000), chunked=True)))
    assert mdb.run("SELECT count(*) FROM verifications WHERE account_id = :a", a=account) == [[0]]


# -- the request's head: its limits and a read deadline ------------------------------------------------
def _send_quietly(connection: Connection, data: bytes) -> threading.Thread:
    """Send from a thread: the server answers and closes long before 2 MB are sent (EPIPE, reset)."""

    def send() -> None:
        try:
            connection.send(data)
        except OSError:
            pass

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("target", TARGETS)
def test_a_2mb_request_line_is_refused_414_and_the_server_serves_on(served: Served, mdb, target):
    before = mdb.run(STATE)
    line = b"GET /?token=" + b"a" * (2 * 1024 * 1024) + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with Connection(served.urls[target], timeout=10) as connection:
        sender = _send_quietly(connection, line)
        _refused(connection.answer(), 414)
        assert connection.answer() is None  # and the connection is closed
        sender.join(10)
    assert mdb.run(STATE) == before
    with Connection(served.urls[target]) as connection:
        answer = connection.exchange(_ordinary(target))
        assert answer is not None and answer.status < 500
    assert "aaaaaaaa" not in served.output(target) and "request_refused" in served.output(target)


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Big": "b" * 9000},  # one field over 8,190 bytes
        {f"X-Many-{n}": "m" for n in range(101)},  # over 100 fields
        {f"X-Wide-{n}": "w" * 8000 for n in range(10)},  # each within its limit, 80 KB in all
    ],
    ids=["field", "fields", "head"],
)
def test_over_large_headers_are_refused_431(served: Served, mdb, headers):
    before = mdb.run(STATE)
    with Connection(served.urls["confirm_verification"]) as connection:
        _refused(connection.exchange(request_bytes("GET", "/", headers)), 431)
    assert mdb.run(STATE) == before


def test_a_head_sent_a_line_at_a_time_is_refused_408_and_frees_its_thread(served: Served, mdb):
    """Two slow-header clients hold both of the server's threads (THREADS=2): until the deadline
    drops them, an ordinary request waits; once it has, it is served."""
    url = served.urls["create_verification"]
    before = mdb.run("SELECT count(*) FROM verifications")[0][0]
    slow = [Connection(url, timeout=10) for _ in range(2)]
    stop = threading.Event()

    def trickle(connection: Connection) -> None:
        try:
            connection.send(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            while not stop.wait(0.3):
                connection.send(b"X-Slow: 1\r\n")
        except OSError:
            pass  # the server closed it

    started = time.monotonic()
    threads = [threading.Thread(target=trickle, args=(c,), daemon=True) for c in slow]
    for thread in threads:
        thread.start()
    try:
        time.sleep(0.5)  # both heads begun
        with Connection(url, timeout=10) as ordinary:
            answer = ordinary.exchange(_ordinary("create_verification"))
            assert answer is not None and answer.status == 201
            served_after = time.monotonic() - started
        answers = [c.answer() for c in slow]
    finally:
        stop.set()
        for connection in slow:
            connection.close()
    for answer in answers:
        _refused(answer, 408)
    assert served_after < 2 + 3  # the 2 s deadline plus slack: not held while the heads trickle on
    assert mdb.run("SELECT count(*) FROM verifications") == [[before + 1]]  # the ordinary one alone


def test_a_body_that_trickles_is_refused_before_it_is_acted_on(served: Served, mdb):
    body = _create_body()
    account = json.loads(body)["account_id"]
    with Connection(served.urls["create_verification"], timeout=10) as connection:
        head = request_bytes("POST", "/", {**JSON, "Idempotency-Key": uuid.uuid4().hex}, b"", content_length=len(body))
        connection.send(head + body[:10])
        started = time.monotonic()
        for byte in body[10:20]:
            time.sleep(0.3)
            try:
                connection.send(bytes([byte]))
            except OSError:
                break
        answer = connection.answer()
    _refused(answer, 400)
    assert time.monotonic() - started < 2 + 3
    assert mdb.run("SELECT count(*) FROM verifications WHERE account_id = :a", a=account) == [[0]]
