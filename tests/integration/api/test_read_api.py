"""GET /<verification_id> on create_verification, through the real functions-framework app on a real
PostgreSQL: what the signup site may learn about its verification, and nothing more."""

from __future__ import annotations

import base64
import json
import uuid

import pytest

from signup_verification import runtime
from signup_verification.outbox import transitions as t
from support.auth import cloud_run_identity, signed_headers
from support.factories import deliver
from support.signup_requests import created_json

EMAIL = {"account_id": "acct-read", "channel": "email", "destination": "ada.lovelace@example.com"}


@pytest.fixture
def client(app_client):
    return app_client("create_verification")


def _create(client, body=EMAIL, key: str | None = None) -> str:
    return created_json(client, body, key)["verification_id"]


def _problem(response, status: int) -> dict:
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == "application/problem+json"
    return response.get_json()


def test_a_new_verification_reads_pending_with_its_queued_delivery(client):
    verification_id = _create(client)
    response = client.get(f"/{verification_id}")
    assert response.status_code == 200 and response.headers["Cache-Control"] == "no-store"
    body = response.get_json()
    assert body["verification_id"] == verification_id
    assert (body["account_id"], body["channel"], body["status"]) == ("acct-read", "email", "pending")
    assert body["verified_at"] is None and body["created_at"] < body["expires_at"]
    assert body["destination"] == "a***@example.com"  # masked, never the address
    assert body["deliveries"] == [
        {
            "step": 1,
            "channel": "email",
            "role": "primary",
            "after_seconds": 0,
            "destination": "a***@example.com",
            "status": "ready",
            "attempts": 0,
            "last_outcome": None,
            "accepted_at": None,
            "delivered_at": None,
            "failed_at": None,
            "reason": None,
        }
    ]
    assert (body["verified_channel"], body["verified_via"]) == (None, None)


def test_the_read_follows_delivery_and_confirmation(client, db):
    verification_id = _create(client)
    deliver(db)  # claim, begin, settle accepted: the worker's moves
    delivery = client.get(f"/{verification_id}").get_json()["deliveries"][0]
    assert (delivery["status"], delivery["attempts"], delivery["last_outcome"]) == ("accepted", 1, "accepted")
    assert delivery["accepted_at"] and delivery["accepted_at"].endswith("Z") and len(delivery["accepted_at"]) == 24

    db.run(
        "UPDATE verifications SET status = 'verified', verified_at = now() WHERE id = :id",
        id=uuid.UUID(verification_id),
    )
    body = client.get(f"/{verification_id}").get_json()
    assert body["status"] == "verified" and body["verified_at"].endswith("Z")


def test_a_pending_verification_past_its_expiry_reads_expired(client, db):
    verification_id = _create(client)
    db.run(
        "UPDATE verifications SET created_at = now() - interval '1 hour', expires_at = now() - interval '1 second'"
        " WHERE id = :id",
        id=uuid.UUID(verification_id),
    )
    assert client.get(f"/{verification_id}").get_json()["status"] == "expired"  # before the reconciler's sweep


def test_webhook_events_are_not_deliveries(client, db):
    verification_id = _create(client)
    db.run(
        "INSERT INTO delivery_intents (verification_id, channel, purpose, locale, template_version, role, event_type,"
        " payload) VALUES (:id, 'webhook', 'signup', 'en', 'v1', 'event', 'verification.verified', '{}')",
        id=uuid.UUID(verification_id),
    )
    deliveries = client.get(f"/{verification_id}").get_json()["deliveries"]
    assert [d["channel"] for d in deliveries] == ["email"]


def test_the_answer_never_carries_the_token_or_its_material(client, db):
    verification_id = _create(client)
    claimed = t.claim(db, "w", 10, 30)
    assert claimed
    row = db.one("SELECT * FROM verifications WHERE id = :id", id=uuid.UUID(verification_id))
    key = runtime.get_runtime().keyring.get(row["key_id"])
    token = key.link(row["id"], bytes(row["token_nonce"]))
    text = client.get(f"/{verification_id}").get_data(as_text=True)
    for secret in (token, bytes(row["token_nonce"]).hex(), bytes(row["token_digest"]).hex(), EMAIL["destination"]):
        assert secret not in text
    assert base64.b64encode(bytes(row["token_digest"])).decode() not in text


@pytest.mark.parametrize(
    "path",
    [
        "/f308d5c9-cf4b-4c32-994f-f5ba2bbc3e7d",  # well-formed, unknown (fixed: every test worker collects one id)
        "/not-a-uuid",
        "/c8e56dfa3c6e42b9afd95e38e9d50f50",  # a UUID, but not in its canonical form
        "/cf02e483-4852-4f15-a4dd-0fba43cacff2/deliveries",
        "/%00",
        "/' OR 1=1 --",
    ],
)
def test_unknown_or_malformed_ids_are_one_404(client, path):
    body = _problem(client.get(path), 404)
    assert body["type"].endswith("/verification-not-found")
    assert "Traceback" not in json.dumps(body)


def test_methods_on_a_verification_and_on_the_root(client):
    verification_id = _create(client)
    assert client.head(f"/{verification_id}").status_code == 200
    for method in ("POST", "PUT", "DELETE"):
        response = client.open(f"/{verification_id}", method=method, json=EMAIL, headers={"Idempotency-Key": "k"})
        assert _problem(response, 405) and response.headers["Allow"] == "GET, HEAD"
    root = client.get("/")
    assert _problem(root, 405) and root.headers["Allow"] == "POST"  # POST / stays the create


def test_production_requires_the_callers_identity_to_read(client, db, monkeypatch):
    verification_id = _create(client)
    monkeypatch.setenv("ENVIRONMENT", "production")
    monkeypatch.setenv("SMS_ALLOWED_COUNTRIES", "US")
    runtime.reset()
    refused = client.get(f"/{verification_id}")
    assert _problem(refused, 401)
    allowed = client.get(
        f"/{verification_id}", headers={"Authorization": cloud_run_identity("site@p.iam.gserviceaccount.com")}
    )
    assert allowed.status_code == 200 and allowed.get_json()["status"] == "pending"


def test_a_signed_target_needs_a_signed_read_accepted_once(client, monkeypatch):
    verification_id = _create(client)
    secret = b"r" * 32
    monkeypatch.setenv("REQUEST_SIGNING_KEYS", "site1:" + base64.urlsafe_b64encode(secret).decode().rstrip("="))
    runtime.reset()
    assert _problem(client.get(f"/{verification_id}"), 401)
    headers = signed_headers(secret, b"", method="GET", path=f"/{verification_id}")
    assert client.get(f"/{verification_id}", headers=headers).status_code == 200
    assert _problem(client.get(f"/{verification_id}", headers=headers), 401)  # the same signature again
    post_signature = signed_headers(secret, b"")  # signed for POST: not a GET's
    assert _problem(client.get(f"/{verification_id}", headers=post_signature), 401)


def test_a_fallback_shows_as_its_own_delivery_with_its_masked_number(client):
    body = {
        **EMAIL,
        "account_id": "acct-fallback",
        "fallback": {"channel": "sms", "destination": "+14155550142", "after_seconds": 120},
    }
    verification_id = _create(client, body)
    deliveries = client.get(f"/{verification_id}").get_json()["deliveries"]
    assert [(d["step"], d["channel"], d["role"], d["after_seconds"], d["destination"]) for d in deliveries] == [
        (1, "email", "primary", 0, "a***@example.com"),
        (2, "sms", "fallback", 120, "+1******0142"),
    ]
