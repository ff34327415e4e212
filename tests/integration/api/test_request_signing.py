"""Issue 15, item 9: Verify-Signature covers method, target, Idempotency-Key, t and the body's
digest; a signature is accepted once; keys may be scoped to a target; the legacy Signature header
keeps its old meaning for one release."""

from __future__ import annotations

import base64
import json
import time

import pytest

from signup_verification import runtime
from signup_verification.api import auth
from signup_verification.config import load
from support.auth import signed_headers

SECRET, OTHER = b"s" * 32, b"o" * 32
KEY = "caller1:" + base64.urlsafe_b64encode(SECRET).decode().rstrip("=")
RECONCILE_ONLY = "reconcile:ops1:" + base64.urlsafe_b64encode(OTHER).decode().rstrip("=")
BODY = json.dumps({"account_id": "acct-sig", "channel": "email", "destination": "sig@example.com"}).encode()


def _count(db, table: str) -> int:
    return db.run(f"SELECT count(*) FROM {table}")[0][0]  # noqa: S608 - fixed table names


@pytest.fixture
def signed(service_env, monkeypatch, app_client):
    monkeypatch.setenv("ENVIRONMENT", "production")
    monkeypatch.setenv("SMS_ALLOWED_COUNTRIES", "US")
    monkeypatch.setenv("REQUEST_SIGNING_KEYS", f"{KEY},{RECONCILE_ONLY}")
    monkeypatch.setenv("SIGNED_TARGETS", "create_verification,reconcile")
    runtime.reset()
    return app_client


def _post(client, headers: dict[str, str], body: bytes = BODY):
    return client.post("/", data=body, content_type="application/json", headers=headers)


def test_a_captured_signature_is_refused_with_another_key_or_target_or_twice(signed, db, caplog):
    create = signed("create_verification")
    headers = signed_headers(SECRET, BODY, idempotency_key="first")
    # Another Idempotency-Key under the captured signature: would be a new message.
    assert _post(create, {**headers, "Idempotency-Key": "second"}).status_code == 401
    # Against another target: a create signature must not run a reconcile.
    assert _post(signed("reconcile"), headers).status_code == 401
    assert _count(db, "verifications") == 0
    assert _post(create, headers).status_code == 201
    replay = _post(create, headers)  # the same request again, inside the window
    assert replay.status_code == 401 and replay.mimetype == "application/problem+json"
    assert _count(db, "verifications") == 1
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    # A retry signs again and gets the idempotent answer.
    again = _post(create, signed_headers(SECRET, BODY, idempotency_key="first", timestamp=int(time.time()) + 1))
    assert again.status_code in (200, 201) and _count(db, "verifications") == 1


def test_a_key_scoped_to_a_target_signs_for_that_target_only(signed, db):
    for_reconcile = signed_headers(OTHER, b"", target="reconcile")
    assert signed("reconcile").post("/", headers=for_reconcile).status_code == 200
    create_with_reconcile_key = signed_headers(OTHER, BODY, idempotency_key="k-scoped")
    assert _post(signed("create_verification"), create_with_reconcile_key).status_code == 401
    assert _count(db, "verifications") == 0


def test_the_legacy_signature_header_keeps_its_old_meaning(signed, db):
    create = signed("create_verification")
    legacy = {"Signature": auth.sign(SECRET, BODY), "Idempotency-Key": "legacy-1"}
    assert _post(create, legacy).status_code == 201
    # A key scoped to reconcile does not sign creates, even the old way.
    foreign = {"Signature": auth.sign(OTHER, BODY), "Idempotency-Key": "legacy-2"}
    assert _post(create, foreign).status_code == 401
    # Old semantics: the legacy MAC binds no Idempotency-Key (why it is deprecated) and is not replay-checked.
    assert _count(db, "signature_replay") == 0


def test_reconcile_reaps_expired_signatures(signed, db):
    db.run("INSERT INTO signature_replay (digest, expires_at) VALUES (:d, now() - interval '1 second')", d=b"x" * 32)
    assert signed("reconcile").post("/", headers=signed_headers(OTHER, b"", target="reconcile")).status_code == 200
    assert db.run("SELECT count(*) FROM signature_replay WHERE digest = :d", d=b"x" * 32)[0][0] == 0


def test_scoped_keys_are_parsed_and_checked():
    keys = auth.parse_signing_keys(f"{KEY},{RECONCILE_ONLY}")
    assert [(k.target, k.key_id) for k in keys] == [(None, "caller1"), ("reconcile", "ops1")]
    with pytest.raises(ValueError):
        load({"REQUEST_SIGNING_KEYS": "confirm_verification:" + KEY})
    assert "o" * 10 not in repr(load({"REQUEST_SIGNING_KEYS": RECONCILE_ONLY}).auth)
