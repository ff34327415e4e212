"""The demo signup site against the real create target (over loopback HTTP, through
the client library): sign-up creates with a return_url to the account's page, and only a webhook whose
Standard Webhooks signature verifies marks the account verified, once per webhook-id."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook

from signup_verification import runtime
from signup_verification.local import demo_site
from support.served import serve

SECRET = "whsec_" + base64.b64encode(b"d" * 32).decode()
ORIGIN = "http://localhost:8089"


@pytest.fixture
def site(service_env, monkeypatch):
    monkeypatch.setenv("RETURN_URL_ALLOWED_ORIGINS", ORIGIN)
    runtime.reset()
    from signup_verification_client import Client

    with serve("create_verification") as urls:
        app = demo_site.create_app(Client(urls["create_verification"]), SECRET, ORIGIN)
        yield app.test_client(), app.config["site"]


def _sign_up(client, email: str | None = None):
    response = client.post("/signup", data={"email": email or f"ada.{uuid.uuid4().hex[:6]}@example.com"})
    assert response.status_code == 303, response.get_data(as_text=True)
    account_id = response.headers["Location"].rsplit("/", 1)[1]
    return account_id


def _webhook(client, event_type: str, data: dict, secret: str = SECRET, msg_id: str | None = None):
    body = json.dumps({"type": event_type, "timestamp": datetime.now(UTC).isoformat(), "data": data})
    msg_id = msg_id or f"msg_{uuid.uuid4().hex}"
    now = datetime.now(UTC)
    headers = {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(secret).sign(msg_id, now, body),
        "Content-Type": "application/json",
    }
    return client.post("/webhooks", data=body, headers=headers)


def _status(client, account_id: str) -> str:
    return client.get(f"/api/accounts/{account_id}").get_json()["status"]


def test_sign_up_creates_a_verification_that_returns_to_the_account_page(site, db):
    client, state = site
    account_id = _sign_up(client)
    account = state.accounts[account_id]
    row = db.one(
        "SELECT account_id, return_url, status FROM verifications WHERE id = :id", id=uuid.UUID(account.verification_id)
    )
    assert row == {"account_id": account_id, "return_url": f"{ORIGIN}/accounts/{account_id}", "status": "pending"}
    page = client.get(f"/accounts/{account_id}").get_data(as_text=True)
    assert 'id="account-status" class="status pending">pending<' in page
    assert 'id="service-status">pending<' in page  # the read API, through the client


def test_only_a_verified_webhook_marks_the_account_verified_once(site):
    client, state = site
    account_id = _sign_up(client)
    data = {
        "verification_id": state.accounts[account_id].verification_id,
        "account_id": account_id,
        "status": "verified",
    }
    forged = _webhook(client, "verification.verified", data, secret="whsec_" + base64.b64encode(b"x" * 32).decode())
    assert forged.status_code == 400 and _status(client, account_id) == "pending"
    assert _webhook(client, "verification.verified", data, msg_id="msg_1").status_code == 204
    assert _status(client, account_id) == "verified"
    assert _webhook(client, "verification.verified", data, msg_id="msg_1").status_code == 204  # a resend
    assert state.duplicates == 1 and state.accounts[account_id].events == ["verification.verified"]
    page = client.get(f"/accounts/{account_id}").get_data(as_text=True)
    assert 'class="status verified">verified<' in page and "refresh" not in page


def test_events_of_another_verification_change_nothing(site):
    client, state = site
    account_id = _sign_up(client)
    other = {"verification_id": str(uuid.uuid4()), "account_id": account_id}
    assert _webhook(client, "verification.verified", other).status_code == 204  # acknowledged, not applied
    assert _status(client, account_id) == "pending"
    expired = {"verification_id": state.accounts[account_id].verification_id, "account_id": account_id}
    _webhook(client, "verification.expired", expired)
    assert _status(client, account_id) == "expired"


def test_a_refused_sign_up_shows_the_field_error(site, db):
    client, _ = site
    response = client.post("/signup", data={"email": "not an address"})
    assert response.status_code == 422 and "Could not send the email" in response.get_data(as_text=True)
    assert db.run("SELECT count(*) FROM verifications")[0][0] == 0


def test_the_signing_key_for_create(tmp_path):
    assert demo_site.create_signing_key({}) is None
    assert demo_site.create_signing_key({"REQUEST_SIGNING_KEYS": "reconcile:ops:abc,site:def"}) == "site:def"
    assert (
        demo_site.create_signing_key({"REQUEST_SIGNING_KEYS": "create_verification:s:abc"})
        == "create_verification:s:abc"
    )
