"""Verify-Signature covers method, target, path, query, Idempotency-Key, t and the body's digest; a
request is accepted once whichever of its signatures matched; keys may be scoped to a target.
(The older `v1=` entries and the legacy `Signature` header: test_legacy_signatures.py.)"""

from __future__ import annotations

import base64
import json
import time

import pytest

from signup_verification import runtime
from signup_verification.api import request_signatures as signatures
from signup_verification.api.config import parse_signing_keys
from signup_verification.config import load
from support.auth import AUTH_SCHEMES, signed_headers

SECRET, ROTATED, OTHER = b"s" * 32, b"n" * 32, b"o" * 32
KEY = "caller1:" + base64.urlsafe_b64encode(SECRET).decode().rstrip("=")
NEW_KEY = "caller2:" + base64.urlsafe_b64encode(ROTATED).decode().rstrip("=")
RECONCILE_ONLY = "reconcile:ops1:" + base64.urlsafe_b64encode(OTHER).decode().rstrip("=")
BODY = json.dumps({"account_id": "acct-sig", "channel": "email", "destination": "sig@example.com"}).encode()


def _count(db, table: str) -> int:
    return db.run(f"SELECT count(*) FROM {table}")[0][0]  # noqa: S608 - fixed table names


@pytest.fixture
def signed(service_env, monkeypatch, app_client):
    monkeypatch.setenv("ENVIRONMENT", "production")
    monkeypatch.setenv("SMS_ALLOWED_COUNTRIES", "US")
    monkeypatch.setenv("RATE_LIMIT_SPACING_SECONDS", "0")
    monkeypatch.setenv("REQUEST_SIGNING_KEYS", f"{KEY},{NEW_KEY},{RECONCILE_ONLY}")
    monkeypatch.setenv("SIGNED_TARGETS", "create_verification,reconcile,status")
    runtime.reset()
    return app_client


def _post(client, headers: dict[str, str], body: bytes = BODY, path: str = "/"):
    return client.post(path, data=body, content_type="application/json", headers=headers)


def _refused(response) -> None:
    assert response.status_code == 401 and response.mimetype == "application/problem+json", response.get_data()
    assert response.headers["WWW-Authenticate"] in AUTH_SCHEMES  # a scheme docs/openapi.yaml names


def _create(client, account: str) -> str:
    body = json.dumps({"account_id": account, "channel": "email", "destination": f"{account}@example.com"}).encode()
    created = _post(client, signed_headers(SECRET, body, idempotency_key=account), body)
    assert created.status_code == 201, created.get_data(as_text=True)
    return created.get_json()["verification_id"]


def test_a_captured_signature_is_refused_with_another_key_or_target_or_twice(signed, db, caplog):
    create = signed("create_verification")
    headers = signed_headers(SECRET, BODY, idempotency_key="first")
    # Another Idempotency-Key under the captured signature: would be a new message.
    _refused(_post(create, {**headers, "Idempotency-Key": "second"}))
    # Against another target: a create signature must not run a reconcile.
    _refused(_post(signed("reconcile"), headers))
    assert _count(db, "verifications") == 0
    assert _post(create, headers).status_code == 201
    _refused(_post(create, headers))  # the same request again, inside the window
    assert _count(db, "verifications") == 1
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    # A retry signs again and gets the idempotent answer.
    again = _post(create, signed_headers(SECRET, BODY, idempotency_key="first", timestamp=int(time.time()) + 1))
    assert again.status_code in (200, 201) and _count(db, "verifications") == 1


def test_a_request_signed_with_several_keys_is_used_once_whichever_signature_matched(signed, db):
    """One `v2=` per key while rotating: the request is recorded once, so neither it nor any
    subset or reordering of its signatures is accepted again."""
    create = signed("create_verification")
    t = int(time.time())
    request = signatures.SignedRequest("POST", "create_verification", "/", "", "rotating", BODY)
    both = signatures.sign_v2([SECRET, ROTATED], request, t)
    first, second = (f"t={t},{part}" for part in both.split(",")[1:])
    assert _post(create, {"Verify-Signature": both, "Idempotency-Key": "rotating"}).status_code == 201
    for subset in (first, second, f"t={t},{second.split(',')[1]},{first.split(',')[1]}"):
        _refused(_post(create, {"Verify-Signature": subset, "Idempotency-Key": "rotating"}))
    assert _count(db, "verifications") == 1
    assert _count(db, "signature_replay") == 1  # one record for the request, not one per MAC


def test_a_signature_for_one_path_does_not_read_another_verification(signed):
    """A signature made for GET /<A> is refused on GET /<B>, and B's data is not answered."""
    create = signed("create_verification")
    a, b = _create(create, "acct-path-a"), _create(create, "acct-path-b")
    for_a = signed_headers(SECRET, b"", method="GET", path=f"/{a}")
    stolen = create.get(f"/{b}", headers=for_a)
    _refused(stolen)
    assert b not in stolen.get_data(as_text=True)
    read = create.get(f"/{a}", headers=for_a)
    assert read.status_code == 200 and read.get_json()["verification_id"] == a


def test_the_path_is_signed_as_sent_and_the_query_raw(signed):
    """The path's percent-encoding as it was on the request line (not the decoded path the
    framework routes), the query string byte for byte: either changed is another request."""
    create = signed("create_verification")
    verification_id = _create(create, "acct-raw-path")
    encoded = "/%" + format(ord(verification_id[0]), "02x") + verification_id[1:]
    as_sent = signed_headers(SECRET, b"", method="GET", path=encoded)
    _refused(create.get(f"/{verification_id}", headers=as_sent))
    assert create.get(encoded, headers=as_sent).status_code == 200
    status = signed("status")
    with_query = signed_headers(SECRET, b"", target="status", method="GET", query="window=300")
    _refused(status.get("/", headers=with_query))  # signed with a query, sent without
    _refused(status.get("/?window=301", headers=with_query))
    assert status.get("/?window=300", headers=with_query).status_code == 200


@pytest.mark.parametrize("part", ["method", "path", "query", "key", "t", "body", "target"])
def test_each_covered_part_changed_is_refused(signed, db, part):
    create = signed("create_verification")
    t = int(time.time())
    headers = signed_headers(SECRET, BODY, idempotency_key="part", timestamp=t)
    changed = {
        "method": lambda: create.put("/", data=BODY, content_type="application/json", headers=headers),
        "path": lambda: _post(create, headers, path="/x"),
        "query": lambda: _post(create, headers, path="/?a=1"),
        "key": lambda: _post(create, {**headers, "Idempotency-Key": "part2"}),
        "t": lambda: _post(
            create, {**headers, "Verify-Signature": headers["Verify-Signature"].replace(f"t={t}", f"t={t + 1}")}
        ),
        "body": lambda: _post(create, headers, BODY.replace(b"sig@", b"evil@")),
        "target": lambda: _post(signed("status"), headers),
    }[part]()
    _refused(changed)
    assert _count(db, "verifications") == 0 and _count(db, "signature_replay") == 0
    assert _post(create, headers).status_code == 201  # the request as signed still goes through, once


def test_a_key_scoped_to_a_target_signs_for_that_target_only(signed, db):
    for_reconcile = signed_headers(OTHER, b"", target="reconcile")
    assert signed("reconcile").post("/", headers=for_reconcile).status_code == 200
    create_with_reconcile_key = signed_headers(OTHER, BODY, idempotency_key="k-scoped")
    _refused(_post(signed("create_verification"), create_with_reconcile_key))
    assert _count(db, "verifications") == 0


def test_reconcile_reaps_expired_signatures(signed, db):
    db.run("INSERT INTO signature_replay (digest, expires_at) VALUES (:d, now() - interval '1 second')", d=b"x" * 32)
    assert signed("reconcile").post("/", headers=signed_headers(OTHER, b"", target="reconcile")).status_code == 200
    assert db.run("SELECT count(*) FROM signature_replay WHERE digest = :d", d=b"x" * 32)[0][0] == 0


def test_scoped_keys_are_parsed_and_checked():
    keys = parse_signing_keys(f"{KEY},{RECONCILE_ONLY}")
    assert [(k.target, k.key_id) for k in keys] == [(None, "caller1"), ("reconcile", "ops1")]
    with pytest.raises(ValueError):
        load({"REQUEST_SIGNING_KEYS": "confirm_verification:" + KEY})
    assert "o" * 10 not in repr(load({"REQUEST_SIGNING_KEYS": RECONCILE_ONLY}).auth)
