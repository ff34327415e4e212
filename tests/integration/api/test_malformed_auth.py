"""Malformed auth inputs (signature headers, identity tokens) are refused with 401 problem+json, never a 500."""

from __future__ import annotations

import base64
import json
import time

import pytest

from signup_verification import runtime

SIGNING_KEYS = "caller1:" + base64.urlsafe_b64encode(b"s" * 32).decode().rstrip("=")
BODY = {"account_id": "acct", "channel": "email", "destination": "ada@example.com"}


def _jwt(claims_json: str) -> str:
    part = base64.urlsafe_b64encode(claims_json.encode()).decode().rstrip("=")
    return f"Bearer eyJhbGciOiJSUzI1NiJ9.{part}.sig"


@pytest.fixture
def create(service_env, monkeypatch, app_client):
    monkeypatch.setenv("ENVIRONMENT", "production")
    monkeypatch.setenv("SMS_ALLOWED_COUNTRIES", "US")
    monkeypatch.setenv("REQUEST_SIGNING_KEYS", SIGNING_KEYS)
    runtime.reset()
    return app_client("create_verification")


@pytest.mark.parametrize(
    "headers",
    [
        {"Signature": "t=\u00b2\u00b3,v1=" + "0" * 64},
        {"Verify-Signature": "t=\u00b2\u00b3,v1=" + "0" * 64},
        {"Verify-Signature": "t=\u00b2\u00b3,v2=" + "0" * 64},
        {"Verify-Signature": f"t={int(time.time())},v2=" + "z" * 64},
        {"Verify-Signature": "t=,v2=,=,,t=1=2"},
        {"Verify-Signature": "t=" + "9" * 40 + ",v2=" + "0" * 64},
        {"Verify-Signature": f"t={int(time.time())},v2=" + "\u00e9" * 64},
        {"Signature": "t=" + "9" * 12 + ",v1=" + "0" * 64},
        {"Authorization": _jwt(json.dumps({"iss": ["https://accounts.google.com"], "exp": time.time() + 60}))},
        {"Authorization": _jwt(json.dumps({"iss": {"a": 1}, "exp": time.time() + 60}))},
        {"Authorization": _jwt("[" * 5000 + "]" * 5000)},
        {"Authorization": _jwt('{"iss": ' + "[" * 5000 + "]" * 5000 + "}")},
    ],
)
def test_malformed_signatures_and_identity_tokens_are_401_not_500(create, db, headers, caplog):
    response = create.post("/", json=BODY, headers={"Idempotency-Key": "k1", **headers})
    assert response.status_code == 401 and response.mimetype == "application/problem+json"
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    assert db.run("SELECT count(*) FROM verifications")[0][0] == 0
