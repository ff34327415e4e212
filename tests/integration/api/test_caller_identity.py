"""Caller identity (api/auth.py), checked the way an attacker would try it: production refuses callers
without an accepted identity (a Cloud Run identity token Google issued, unexpired, of an allowed
invoker when ALLOWED_INVOKERS narrows them); the HMAC-signed mode accepts exactly the requests signed
with a configured key within the time window, and its header is parsed strictly. A refused request
is a 401 problem+json and writes nothing.
"""

from __future__ import annotations

import base64
import json
import time

import pytest

from signup_verification import runtime
from signup_verification.api import auth
from signup_verification.api import request_signatures as signatures
from signup_verification.api.config import AuthConfig, parse_signing_keys
from signup_verification.config import load
from support.auth import AUTH_SCHEMES, cloud_run_identity, signed_headers

SIGNING_SECRET = b"s" * 32
SIGNING_KEYS = "caller1:" + base64.urlsafe_b64encode(SIGNING_SECRET).decode().rstrip("=")
ROTATED = "caller2:" + base64.urlsafe_b64encode(b"t" * 32).decode().rstrip("=")
CREATE = {"account_id": "acct-auth", "channel": "email", "destination": "auth@example.com"}


def identity(email: str = "scheduler@p.iam.gserviceaccount.com", **kwargs) -> str:
    return cloud_run_identity(email, **kwargs)


def rows(db) -> int:
    return db.run("SELECT (SELECT count(*) FROM verifications) + (SELECT count(*) FROM idempotency_keys)")[0][0]


def assert_refused(response) -> None:
    assert response.status_code == 401, response.get_data(as_text=True)
    assert response.headers["Content-Type"] == "application/problem+json"
    assert response.get_json()["type"].endswith("/unauthenticated")
    assert response.headers["WWW-Authenticate"] in AUTH_SCHEMES


@pytest.fixture
def production(service_env, monkeypatch):
    monkeypatch.setenv("ENVIRONMENT", "production")
    monkeypatch.setenv("SMS_ALLOWED_COUNTRIES", "US,GB")
    monkeypatch.setenv("DISPATCH_IDLE_WAIT", "0")  # production polls an empty outbox until its deadline
    runtime.reset()
    return monkeypatch


def test_production_refuses_callers_without_an_identity(app_client, db, production):
    assert_refused(app_client("create_verification").post("/", json=CREATE, headers={"Idempotency-Key": "a1"}))
    assert_refused(app_client("dispatch").post("/"))
    assert_refused(app_client("reconcile").post("/"))
    assert_refused(app_client("status").get("/"))
    assert rows(db) == 0
    # The link's page stays public: people open it from their inbox.
    assert app_client("confirm_verification").get("/", query_string={"token": "x" * 43}).status_code == 404
    # A token Cloud Run passed on is accepted; one that is expired or not Google's is not.
    assert app_client("dispatch").post("/", headers={"Authorization": identity()}).status_code == 200
    assert app_client("status").get("/", headers={"X-Serverless-Authorization": identity()}).status_code == 200
    assert_refused(app_client("dispatch").post("/", headers={"Authorization": identity(exp=time.time() - 600)}))
    assert_refused(app_client("dispatch").post("/", headers={"Authorization": identity(iss="https://evil.example")}))
    assert_refused(app_client("dispatch").post("/", headers={"Authorization": "Bearer not-a-jwt"}))
    created = app_client("create_verification").post(
        "/",
        json=CREATE,
        headers={"Idempotency-Key": "a2", "Authorization": identity("backend@p.iam.gserviceaccount.com")},
    )
    assert created.status_code == 201


def test_allowed_invokers_narrow_the_accepted_principals(app_client, production):
    production.setenv("ALLOWED_INVOKERS", "scheduler@p.iam.gserviceaccount.com")
    runtime.reset()
    dispatch = app_client("dispatch")
    assert dispatch.post("/", headers={"Authorization": identity()}).status_code == 200
    assert_refused(dispatch.post("/", headers={"Authorization": identity("intruder@other.iam.gserviceaccount.com")}))
    # Cloud Run authorizes with X-Serverless-Authorization when both are sent: so does the function.
    assert_refused(
        dispatch.post(
            "/",
            headers={
                "Authorization": identity(),
                "X-Serverless-Authorization": identity("intruder@other.iam.gserviceaccount.com"),
            },
        )
    )


def signed_post(
    client,
    body: dict,
    key: str = "k1",
    *,
    secret: bytes = SIGNING_SECRET,
    timestamp: int | None = None,
    tamper: bool = False,
    extra: dict | None = None,
):
    raw = json.dumps(body).encode()
    headers = signed_headers(secret, raw, idempotency_key=key, timestamp=timestamp)
    if tamper:
        raw = raw.replace(b"auth@", b"evil@")
    return client.post("/", data=raw, content_type="application/json", headers={**headers, **(extra or {})})


@pytest.mark.parametrize("environment", ["local", "production"])
def test_signed_requests_are_required_and_checked(app_client, db, service_env, monkeypatch, environment):
    monkeypatch.setenv("ENVIRONMENT", environment)
    monkeypatch.setenv("SMS_ALLOWED_COUNTRIES", "US,GB")
    monkeypatch.setenv("DISPATCH_IDLE_WAIT", "0")
    monkeypatch.setenv("REQUEST_SIGNING_KEYS", f"{SIGNING_KEYS},{ROTATED}")
    runtime.reset()
    create = app_client("create_verification")
    assert_refused(create.post("/", json=CREATE, headers={"Idempotency-Key": "s0"}))  # unsigned
    assert_refused(signed_post(create, CREATE, "s1", tamper=True))  # body changed after signing
    assert_refused(signed_post(create, CREATE, "s2", timestamp=int(time.time()) - 301))  # outside the window
    assert_refused(signed_post(create, CREATE, "s3", secret=b"x" * 32))  # a key we do not hold
    # A platform identity header is not enough on a signed target: nobody verified it there.
    assert_refused(create.post("/", json=CREATE, headers={"Idempotency-Key": "s4", "Authorization": identity()}))
    assert rows(db) == 0
    assert signed_post(create, CREATE, "s5").status_code == 201
    assert (
        signed_post(
            create, {**CREATE, "account_id": "acct-auth-2", "destination": "auth2@example.com"}, "s6", secret=b"t" * 32
        ).status_code
        == 201
    )  # the second key of a rotation
    # Targets outside SIGNED_TARGETS keep the platform rule (production) or stay open (local).
    dispatch = app_client("dispatch").post("/")
    assert dispatch.status_code == (401 if environment == "production" else 200)


def test_signature_header_parsing_is_strict():
    config = AuthConfig(production=True, signing_keys=parse_signing_keys(SIGNING_KEYS))
    body, now = b'{"a": 1}', 1_800_000_000
    request = signatures.SignedRequest("POST", "create_verification", "/", "", "k1", body)

    def verified(header: str | None, at: int = now) -> bool:
        return signatures.verify(config.secrets_for("create_verification"), 300, header, request, at) is not None

    good = auth.sign_request(SIGNING_SECRET, "POST", "create_verification", "k1", body, now)
    assert verified(good)
    assert verified(good + ",v2=" + "0" * 64)  # extra candidates are fine
    assert not verified(good, now + 301)
    assert not verified(good.replace("t=", "t=-"))
    assert not verified(good[:-1])
    assert not verified(None)
    assert not verified(f"t={now}")
    with pytest.raises(ValueError):
        load({"REQUEST_SIGNING_KEYS": "k:c2hvcnQ"})  # 5 bytes: too short
    with pytest.raises(ValueError):
        load({"REQUEST_SIGNING_KEYS": SIGNING_KEYS, "SIGNED_TARGETS": "confirm_verification"})
    assert "s" * 10 not in repr(load({"REQUEST_SIGNING_KEYS": SIGNING_KEYS}).auth)
