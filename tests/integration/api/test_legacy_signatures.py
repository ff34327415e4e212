"""The older signature forms, each accepted only where it binds the whole request, and once:
`v1=` entries (no path, no query) on `/` without a query; the legacy `Signature` header (t and
body only) on a POST with a body. Every use is logged as `deprecated_signature`."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

import pytest

from signup_verification import runtime
from signup_verification.api import auth
from signup_verification.api import request_signatures as signatures
from support.auth import signed_headers

SECRET, ROTATED, OTHER = b"s" * 32, b"n" * 32, b"o" * 32
KEYS = ",".join(
    f"{prefix}{base64.urlsafe_b64encode(secret).decode().rstrip('=')}"
    for prefix, secret in (("caller1:", SECRET), ("caller2:", ROTATED), ("reconcile:ops1:", OTHER))
)
BODY = json.dumps({"account_id": "acct-old", "channel": "email", "destination": "old@example.com"}).encode()


def _v1(secret: bytes, method: str, key: str | None, t: int, body: bytes, target: str = "create_verification") -> str:
    return hmac.new(secret, signatures.canonical_v1(method, target, key, t, body), hashlib.sha256).hexdigest()


def _count(db, table: str) -> int:
    return db.run(f"SELECT count(*) FROM {table}")[0][0]  # noqa: S608 - fixed table names


def _refused(response) -> None:
    assert response.status_code == 401 and response.mimetype == "application/problem+json", response.get_data()


def _deprecated(caplog) -> list[str]:
    return [
        r.json_fields["scheme"]
        for r in caplog.records
        if getattr(r, "json_fields", {}).get("event") == "deprecated_signature"
    ]


@pytest.fixture
def signed(service_env, monkeypatch, app_client):
    monkeypatch.setenv("ENVIRONMENT", "production")
    monkeypatch.setenv("SMS_ALLOWED_COUNTRIES", "US")
    monkeypatch.setenv("REQUEST_SIGNING_KEYS", KEYS)
    monkeypatch.setenv("SIGNED_TARGETS", "create_verification,reconcile")
    runtime.reset()
    return app_client


def _post(client, headers: dict[str, str], body: bytes = BODY, path: str = "/"):
    return client.post(path, data=body, content_type="application/json", headers=headers)


def _create(client, account: str) -> str:
    body = json.dumps({"account_id": account, "channel": "email", "destination": f"{account}@example.com"}).encode()
    created = _post(client, signed_headers(SECRET, body, idempotency_key=account), body)
    assert created.status_code == 201
    return created.get_json()["verification_id"]


def test_a_request_with_two_v1_signatures_is_accepted_once_not_once_per_key(signed, db, caplog):
    """`t=…,v1=A,v1=B` is accepted; then `v1=A` alone (or `v1=B`) is a replay."""
    create = signed("create_verification")
    t = int(time.time())
    a, b = _v1(SECRET, "POST", "two-keys", t, BODY), _v1(ROTATED, "POST", "two-keys", t, BODY)
    assert _post(create, {"Verify-Signature": f"t={t},v1={a},v1={b}", "Idempotency-Key": "two-keys"}).status_code == 201
    _refused(_post(create, {"Verify-Signature": f"t={t},v1={a}", "Idempotency-Key": "two-keys"}))
    _refused(_post(create, {"Verify-Signature": f"t={t},v1={b}", "Idempotency-Key": "two-keys"}))
    # Nor under the new form: the same request named by its v2 signature was used already.
    _refused(_post(create, signed_headers(SECRET, BODY, idempotency_key="two-keys", timestamp=t)))
    assert _count(db, "verifications") == 1 and _count(db, "signature_replay") == 1
    assert _deprecated(caplog) == ["v1"]


def test_a_v1_signature_never_opens_a_path_or_a_query(signed, db):
    """v1 does not cover the path: on /<verification id> (or with any query) it is not accepted at
    all, so a v1 made for one read cannot read another verification."""
    create = signed("create_verification")
    a, b = _create(create, "acct-v1-a"), _create(create, "acct-v1-b")
    t = int(time.time())
    read_v1 = {"Verify-Signature": f"t={t},v1={_v1(SECRET, 'GET', None, t, b'')}"}
    for path in (f"/{a}", f"/{b}"):
        refused = create.get(path, headers=read_v1)
        _refused(refused)
        assert b not in refused.get_data(as_text=True)
    query = {"Verify-Signature": f"t={t},v1={_v1(SECRET, 'POST', 'q', t, BODY)}", "Idempotency-Key": "q"}
    _refused(_post(create, query, path="/?source=old"))
    # Beside a v2 for the path, a v1 entry is ignored: the v2 is what lets the read in.
    v2 = signed_headers(SECRET, b"", method="GET", path=f"/{a}")["Verify-Signature"]
    assert (
        create.get(
            f"/{a}", headers={"Verify-Signature": v2 + "," + read_v1["Verify-Signature"].split(",")[1]}
        ).status_code
        == 200
    )


def test_a_captured_legacy_empty_body_signature_reads_nothing_and_runs_nothing(signed, db, caplog):
    """The legacy header over an empty body signed every empty request of its second: a read of A,
    then of B, then A again, and reconcile twice. On GET and on empty bodies it is refused."""
    create, reconcile = signed("create_verification"), signed("reconcile")
    a, b = _create(create, "acct-legacy-a"), _create(create, "acct-legacy-b")
    captured = {"Signature": auth.sign(SECRET, b"")}
    for path in (f"/{a}", f"/{b}", f"/{a}"):
        refused = create.get(path, headers=captured)
        _refused(refused)
        assert a not in refused.get_data(as_text=True) and b not in refused.get_data(as_text=True)
    for secret in (SECRET, OTHER):  # an unscoped key and the key scoped to reconcile
        for _ in range(2):
            _refused(reconcile.post("/", headers={"Signature": auth.sign(secret, b"")}))
    assert db.run("SELECT count(*) FROM worker_heartbeats WHERE name LIKE 'reconcile:%'")[0][0] == 0
    assert "legacy_unbound" in {getattr(r, "json_fields", {}).get("reason") for r in caplog.records}


def test_a_legacy_signature_over_a_body_is_used_once_wherever_it_is_presented(signed, db, caplog):
    create, reconcile = signed("create_verification"), signed("reconcile")
    legacy = auth.sign(SECRET, BODY)
    assert _post(create, {"Signature": legacy, "Idempotency-Key": "legacy-1"}).status_code == 201
    _refused(_post(create, {"Signature": legacy, "Idempotency-Key": "legacy-1"}))  # the same again
    _refused(_post(create, {"Signature": legacy, "Idempotency-Key": "legacy-2"}))  # a new message: no
    _refused(_post(reconcile, {"Signature": legacy}))  # another target: no
    assert _count(db, "verifications") == 1
    # A key scoped to reconcile does not sign creates, even the old way.
    _refused(_post(create, {"Signature": auth.sign(OTHER, BODY), "Idempotency-Key": "legacy-3"}))
    assert _deprecated(caplog) == ["legacy"]
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


def test_a_stale_or_malformed_legacy_signature_is_refused(signed, db):
    create = signed("create_verification")
    stale = auth.sign(SECRET, BODY, int(time.time()) - 301)
    for header in (stale, stale.replace("v1=", "v2="), "t=1,v1=" + "0" * 64, ""):
        _refused(_post(create, {"Signature": header, "Idempotency-Key": "legacy-x"}))
    assert _count(db, "verifications") == 0
