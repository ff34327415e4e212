"""Signed requests through functions-framework's own server (gunicorn): the path a signature covers
is the one on the request line (gunicorn's RAW_URI, percent-encoding kept, query apart), and a
request is accepted once."""

from __future__ import annotations

import base64
import json
import uuid

import pytest

from support.auth import signed_headers
from support.gunicorn_served import functions_framework
from support.paths import TEST_TOKEN_KEYS
from support.raw_http import Answer, Connection, request_bytes

SECRET = b"g" * 32


@pytest.fixture(scope="module")
def urls(module_database_url, tmp_path_factory):
    env = {
        "DATABASE_URL": module_database_url,
        "TOKEN_KEYS": TEST_TOKEN_KEYS,
        "VERIFY_LOCAL_DIR": str(tmp_path_factory.mktemp("local")),
        "DEPLOYMENT": "signing-test",
        "REQUEST_SIGNING_KEYS": "site1:" + base64.urlsafe_b64encode(SECRET).decode().rstrip("="),
        "SIGNED_TARGETS": "create_verification,status",
        "LOG_FORMAT": "text",
    }
    with functions_framework(["create_verification", "status"], env, tmp_path_factory.mktemp("logs")) as served:
        yield served.urls
        assert "Traceback" not in served.output("create_verification")


def _send(url: str, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> Answer:
    with Connection(url) as connection:
        answer = connection.exchange(request_bytes(method, path, headers, body))
    assert answer is not None
    return answer


def test_a_signed_create_and_read_through_gunicorn(urls):
    url = urls["create_verification"]
    body = json.dumps({"account_id": "acct-g", "channel": "email", "destination": "g@example.com"}).encode()
    key = uuid.uuid4().hex
    headers = {"Content-Type": "application/json", **signed_headers(SECRET, body, idempotency_key=key)}
    created = _send(url, "POST", "/", headers, body)
    assert created.status == 201, created.body
    assert _send(url, "POST", "/", headers, body).status == 401  # the same request again
    verification_id = created.json()["verification_id"]
    # Signed with the path percent-encoded as it goes on the request line: that form, and only it.
    encoded = "/%" + format(ord(verification_id[0]), "02x") + verification_id[1:]
    read = signed_headers(SECRET, b"", method="GET", path=encoded)
    assert _send(url, "GET", f"/{verification_id}", read).status == 401
    answer = _send(url, "GET", encoded, read)
    assert answer.status == 200 and answer.json()["verification_id"] == verification_id


def test_the_query_is_signed_apart_from_the_path_through_gunicorn(urls):
    url = urls["status"]
    signed = signed_headers(SECRET, b"", target="status", method="GET", query="window=300")
    assert _send(url, "GET", "/?window=301", signed).status == 401
    assert _send(url, "GET", "/", signed).status == 401
    assert _send(url, "GET", "/?window=300", signed).status == 200
