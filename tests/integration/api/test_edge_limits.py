"""The edge refuses bodies at or over the limit (unread when declared), duplicate JSON keys and
repeated Idempotency-Key headers, over-long forms; the reserved paths carry our security headers.
Every refusal is problem+json (or a page), writes nothing and logs nothing at ERROR. (Through
functions-framework's gunicorn server, every target: tests/system/test_body_limit_served.py.)"""

from __future__ import annotations

import io

import pytest

from support.raw_http import Connection, request_bytes
from support.served import serve

BODY = '{"account_id": "acct", "channel": "email", "destination": "ada@example.com"}'


def _no_errors_nothing_written(caplog, db) -> None:
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    assert db.run("SELECT count(*) FROM verifications")[0][0] == 0


class _Counting(io.RawIOBase):
    """A request body that counts what the server reads of it."""

    def __init__(self, size: int) -> None:
        self.size, self.position, self.read_bytes = size, 0, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:  # werkzeug's test client measures the stream by seeking
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self.position = offset if whence == 0 else self.size + offset if whence == 2 else self.position + offset
        return self.position

    def tell(self) -> int:
        return self.position

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def, override]
        n = min(len(buffer), self.size - self.position)
        buffer[:n] = b"a" * n
        self.position += n
        self.read_bytes += n
        return n


@pytest.mark.parametrize("target", ["confirm_verification", "create_verification"])
def test_an_oversized_body_is_refused_before_it_is_read(app_client, db, caplog, target):
    body = _Counting(50 * 1024 * 1024)
    response = app_client(target).post(
        "/",
        input_stream=body,
        headers={"Content-Type": "application/json", "Content-Length": str(body.size), "Idempotency-Key": "k"},
    )
    assert response.status_code == 413 and response.mimetype == "application/problem+json"
    assert body.read_bytes == 0  # not even functions-framework's after-request drain read it
    _no_errors_nothing_written(caplog, db)


@pytest.mark.parametrize("size", [16 * 1024, 16 * 1024 + 1])
def test_a_body_at_the_limit_or_over_is_refused_in_process(app_client, db, caplog, size):
    body = BODY.encode() + b" " * (size - len(BODY))  # valid JSON: only its size is wrong
    response = app_client("create_verification").post(
        "/", data=body, headers={"Content-Type": "application/json", "Idempotency-Key": "k"}
    )
    assert response.status_code == 413 and response.mimetype == "application/problem+json"
    assert response.get_json()["detail"] == "The body must be at most 16383 bytes."
    _no_errors_nothing_written(caplog, db)


@pytest.mark.parametrize("chunked", [False, True], ids=["declared", "chunked"])
def test_werkzeugs_server_refuses_the_limit_too(service_env, db, caplog, chunked):
    """functions-framework --debug and the tests' loopback servers run werkzeug's server, which
    marks a chunked body terminated: the edge counts it as it arrives."""
    body = BODY.encode() + b" " * (20_000 - len(BODY))
    with serve("create_verification") as urls, Connection(urls["create_verification"]) as connection:
        headers = {"Content-Type": "application/json", "Idempotency-Key": "wz"}
        answer = connection.exchange(request_bytes("POST", "/", headers, body, chunked=chunked))
    assert answer is not None and answer.status == 413 and answer.mimetype == "application/problem+json"
    _no_errors_nothing_written(caplog, db)


def test_robots_and_favicon_are_ours_with_security_headers(app_client):
    client = app_client("confirm_verification")
    robots = client.get("/robots.txt")
    assert robots.status_code == 200 and robots.get_data(as_text=True) == "User-agent: *\nDisallow: /\n"
    favicon = client.get("/favicon.ico")
    assert favicon.status_code == 204
    for response in (robots, favicon):
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["X-Frame-Options"] == "DENY"
        assert "default-src 'none'" in response.headers["Content-Security-Policy"]


def test_duplicate_json_keys_are_refused(app_client, db, caplog):
    body = BODY[:-1] + ', "destination": "mallory@example.com"}'
    response = app_client("create_verification").post(
        "/", data=body, headers={"Content-Type": "application/json", "Idempotency-Key": "k1"}
    )
    assert response.status_code == 400 and response.mimetype == "application/problem+json"
    assert "destination" in response.get_data(as_text=True)
    _no_errors_nothing_written(caplog, db)


def test_two_idempotency_key_headers_are_refused(app_client, db, caplog):
    response = app_client("create_verification").post(
        "/",
        data=BODY,
        headers=[("Content-Type", "application/json"), ("Idempotency-Key", "k1"), ("Idempotency-Key", "k2")],
    )
    assert response.status_code == 400 and response.mimetype == "application/problem+json"
    _no_errors_nothing_written(caplog, db)


def test_a_confirm_form_with_too_many_fields_is_400_not_500(app_client, db, caplog):
    form = "&".join(f"f{i}=x" for i in range(11)) + "&token=" + "A" * 43
    response = app_client("confirm_verification").post(
        "/", data=form, headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert response.status_code == 400
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
