"""The older signature form, accepted only where it binds the whole request, and once: `v1=` entries
(no path, no query) on `/` without a query, every use logged as `deprecated_signature`. A
`Signature` header (t and body only) is no signature at all."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

import pytest

from signup_verification import runtime
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


def _signature_header(secret: bytes, body: bytes, t: int) -> str:
    """`Signature: t=..,v1=HMAC("<t>." + body)`: a MAC over t and the body only."""
    return f"t={t},v1={hmac.new(secret, f'{t}.'.encode() + body, hashlib.sha256).hexdigest()}"


def test_a_signature_header_alone_is_refused_wherever_it_is_presented(signed, db, caplog):
    """A MAC over t and the body binds no method, target, path or key: it signs nothing here, not a
    create with a body, not a read or a reconcile with an empty one."""
    create, reconcile = signed("create_verification"), signed("reconcile")
    a = _create(create, "acct-signature-a")
    t = int(time.time())
    _refused(_post(create, {"Signature": _signature_header(SECRET, BODY, t), "Idempotency-Key": "sig-1"}))
    refused = create.get(f"/{a}", headers={"Signature": _signature_header(SECRET, b"", t)})
    _refused(refused)
    assert a not in refused.get_data(as_text=True)
    for secret in (SECRET, OTHER):  # an unscoped key and the key scoped to reconcile
        _refused(reconcile.post("/", headers={"Signature": _signature_header(secret, b"", t)}))
    assert _count(db, "verifications") == 1 and _count(db, "signature_replay") == 1  # _create's own
    assert db.run("SELECT count(*) FROM worker_heartbeats WHERE name LIKE 'reconcile:%'")[0][0] == 0
    assert _deprecated(caplog) == []
