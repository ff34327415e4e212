"""Create with a channel policy through the HTTP stack: the fallback is validated and
normalised like a primary destination, passes the same abuse checks, is covered by the idempotency
fingerprint, and bad input is a problem+json that writes nothing."""

from __future__ import annotations

import hashlib
import json

import pytest

from signup_verification.api.create import fingerprint
from signup_verification.api.models import CreateVerificationRequest
from support.factories import written
from support.signup_requests import post_create

EMAIL_FIRST = {
    "account_id": "acct-1",
    "channel": "email",
    "destination": "Ada@Example.com",
    "fallback": {"channel": "sms", "destination": "+1 (415) 555-0100", "after_seconds": 30},
}


def test_email_first_with_sms_fallback_writes_both_intents_with_their_policy(create_app, db):
    response = post_create(create_app(), EMAIL_FIRST, "k1")
    assert response.status_code == 201, response.get_data(as_text=True)
    body = response.get_json()
    assert body["fallback"] == {"channel": "sms", "after_seconds": 30, "policy": "fallback"}
    assert "+14155550100" not in response.get_data(as_text=True)  # the policy, never the destination
    rows = db.rows(
        "SELECT role, channel, policy, after_seconds, destination, status,"
        " extract(epoch FROM next_attempt_at - created_at)::float8 AS due_after"
        " FROM delivery_intents ORDER BY id"
    )
    primary, fallback = rows
    assert (primary["role"], primary["channel"], primary["policy"], primary["destination"]) == (
        "primary",
        "email",
        "fallback",
        None,
    )
    assert primary["due_after"] < 1
    assert (fallback["role"], fallback["channel"], fallback["policy"], fallback["after_seconds"]) == (
        "fallback",
        "sms",
        "fallback",
        30,
    )
    assert fallback["destination"] == "+14155550100"  # normalised to E.164, like a primary
    assert 29.9 < fallback["due_after"] < 30.1 and fallback["status"] == "ready"
    v = db.one("SELECT fallback_channel, fallback_digest, token_digest FROM verifications")
    assert v["fallback_channel"] == "sms" and len(v["fallback_digest"]) == 32
    assert v["fallback_digest"] != v["token_digest"]
    # the fallback destination counts against its own abuse limits; the per-client limit only once
    assert db.run("SELECT role, channel FROM create_events ORDER BY role") == [
        ["fallback", "sms"],
        ["primary", "email"],
    ]


def test_after_seconds_zero_makes_both_due_at_once(create_app, db):
    body = {**EMAIL_FIRST, "fallback": {**EMAIL_FIRST["fallback"], "after_seconds": 0}}
    assert post_create(create_app(), body, "k1").get_json()["fallback"]["policy"] == "both"
    assert db.run("SELECT role, policy FROM eligible_delivery_intents ORDER BY id") == [
        ["primary", "both"],
        ["fallback", "both"],
    ]


@pytest.mark.parametrize(
    "fallback, pointer",
    [
        ({"channel": "email", "destination": "b@example.com", "after_seconds": 30}, "#/fallback"),
        ({"channel": "sms", "destination": "+1415", "after_seconds": 30}, "#/fallback/destination"),
        ({"channel": "sms", "destination": "+14155550100", "after_seconds": -1}, "#/fallback/after_seconds"),
        ({"channel": "sms", "destination": "+14155550100", "after_seconds": "30"}, "#/fallback/after_seconds"),
        ({"channel": "sms", "destination": "+14155550100", "after_seconds": 600}, "#/fallback/after_seconds"),
        ({"channel": "sms", "destination": "+14155550100"}, "#/fallback/after_seconds"),
        ({"channel": "fax", "destination": "+14155550100", "after_seconds": 3}, "#/fallback/channel"),
        ({"channel": "sms", "destination": "+14155550100", "after_seconds": 3, "x": 1}, "#/fallback/x"),
    ],
)
def test_bad_fallbacks_are_field_errors_and_write_nothing(create_app, db, fallback, pointer):
    response = post_create(create_app(VERIFICATION_TTL_SECONDS="600"), {**EMAIL_FIRST, "fallback": fallback}, "k1")
    assert response.status_code == 400 and response.mimetype == "application/problem+json"
    assert pointer in [e["pointer"] for e in response.get_json()["errors"]], response.get_json()
    assert "+14155550100" not in response.get_data(as_text=True)
    assert written(db) == (0, 0, 0, 0)


def test_a_fallback_sms_passes_the_sms_abuse_checks(create_app, db):
    client = create_app(SMS_ALLOWED_COUNTRIES="US")
    body = {**EMAIL_FIRST, "fallback": {"channel": "sms", "destination": "+19002123456", "after_seconds": 30}}
    response = post_create(client, body, "k1")
    assert response.status_code == 422
    problem = response.get_json()
    assert problem["type"].endswith("/sms-number-type-not-allowed")
    assert problem["errors"][0]["pointer"] == "#/fallback/destination"
    response = post_create(
        client, {**EMAIL_FIRST, "fallback": {**body["fallback"], "destination": "+33612345678"}}, "k2"
    )
    assert response.get_json()["type"].endswith("/sms-country-not-allowed")
    assert written(db) == (0, 0, 0, 0)


def test_a_fallback_destination_has_its_own_rate_limit(create_app, db):
    """An SMS pump through the fallback slot: every primary differs, the fallback number is the same."""
    client = create_app(RATE_LIMIT_PER_HOUR="2", RATE_LIMIT_SPACING_SECONDS="0", RATE_LIMIT_ACCOUNT_PER_HOUR="100")
    statuses = [
        post_create(
            client, {**EMAIL_FIRST, "account_id": f"a{i}", "destination": f"u{i}@example.com"}, f"k{i}"
        ).status_code
        for i in range(3)
    ]
    assert statuses == [201, 201, 429]
    assert written(db) == (2, 4, 2, 4)
    # the 429 told about another number (the fallback's): it costs the caller one create
    assert db.run("SELECT account_id FROM create_events WHERE role = 'refused'") == [["a2"]]


def test_the_fallback_does_not_count_twice_against_the_account(create_app, db):
    client = create_app(RATE_LIMIT_ACCOUNT_PER_HOUR="2", RATE_LIMIT_SPACING_SECONDS="0")
    for i in range(2):
        body = {
            **EMAIL_FIRST,
            "destination": f"u{i}@example.com",
            "fallback": {**EMAIL_FIRST["fallback"], "destination": f"+1415555010{i}"},
        }
        assert post_create(client, body, f"k{i}").status_code == 201
    assert (
        post_create(
            client,
            {
                **EMAIL_FIRST,
                "destination": "u9@example.com",
                "fallback": {**EMAIL_FIRST["fallback"], "destination": "+14155550109"},
            },
            "k9",
        ).status_code
        == 429
    )


def test_the_idempotency_fingerprint_covers_the_fallback(create_app, db):
    client = create_app()
    first = post_create(client, EMAIL_FIRST, "k1")
    replay = post_create(client, EMAIL_FIRST, "k1")
    assert replay.status_code == 201 and replay.headers["Idempotent-Replayed"] == "true"
    assert replay.get_data() == first.get_data()
    later = {**EMAIL_FIRST, "fallback": {**EMAIL_FIRST["fallback"], "after_seconds": 31}}
    assert post_create(client, later, "k1").get_json()["type"].endswith("/idempotency-key-reused")
    other_number = {**EMAIL_FIRST, "fallback": {**EMAIL_FIRST["fallback"], "destination": "+14155550199"}}
    assert post_create(client, other_number, "k1").status_code == 422
    no_fallback = {k: v for k, v in EMAIL_FIRST.items() if k != "fallback"}
    assert post_create(client, no_fallback, "k1").status_code == 422
    assert written(db) == (1, 2, 1, 2)


def test_a_request_without_fallback_keeps_the_fingerprint_it_always_had():
    """Keys stored before the channel policy existed (24 h) must still replay: no `fallback: null` in the fingerprint."""
    request = CreateVerificationRequest(account_id="a", channel="email", destination="ada@example.com")
    before = {k: v for k, v in request.model_dump().items() if k not in ("fallback", "return_url", "steps")}
    old = hashlib.sha256(json.dumps(before, sort_keys=True, separators=(",", ":")).encode()).digest()
    assert fingerprint(request) == old
