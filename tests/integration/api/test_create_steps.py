"""Create with ordered `steps` through the HTTP stack: the same verification as `channel` +
`destination` + `fallback` (the two-step shorthand), the same request for the Idempotency-Key, the
same abuse checks at pointers into `steps`, and bad shapes a problem+json that writes nothing."""

from __future__ import annotations

import pytest

from support.factories import written
from support.signup_requests import post_create

STEPS = {
    "account_id": "acct-1",
    "steps": [
        {"channel": "email", "destination": "Ada@Example.com"},
        {"channel": "sms", "destination": "+1 (415) 555-0100", "after_seconds": 30},
    ],
}
SHORTHAND = {
    "account_id": "acct-1",
    "channel": "email",
    "destination": "Ada@Example.com",
    "fallback": {"channel": "sms", "destination": "+1 (415) 555-0100", "after_seconds": 30},
}
INTENTS = "SELECT role, channel, policy, after_seconds, destination, status FROM delivery_intents ORDER BY id"


def test_two_steps_write_what_the_fallback_shorthand_writes(create_app, db):
    client = create_app(RATE_LIMIT_SPACING_SECONDS="0")
    response = post_create(client, STEPS, "k1")
    assert response.status_code == 201, response.get_data(as_text=True)
    assert response.get_json()["fallback"] == {"channel": "sms", "after_seconds": 30, "policy": "fallback"}
    by_steps = db.rows(INTENTS)
    assert [(r["role"], r["channel"], r["destination"]) for r in by_steps] == [
        ("primary", "email", None),
        ("fallback", "sms", "+14155550100"),
    ]
    # the shorthand is the same request: the same key replays the first answer byte for byte
    replay = post_create(client, SHORTHAND, "k1")
    assert replay.headers["Idempotent-Replayed"] == "true" and replay.get_data() == response.get_data()
    assert post_create(client, SHORTHAND, "k2").status_code == 201
    by_shorthand = db.rows(INTENTS)[2:]
    assert by_shorthand == by_steps
    # every step's destination counts against its own limits, as the fallback's does
    assert db.run("SELECT role, channel, count(*) FROM create_events GROUP BY role, channel ORDER BY role") == [
        ["fallback", "sms", 2],
        ["primary", "email", 2],
    ]


def test_one_step_is_a_single_channel_verification(create_app, db):
    body = {"account_id": "acct-1", "steps": [{"channel": "sms", "destination": "+14155550100"}]}
    answer = post_create(create_app(), body, "k1").get_json()
    assert answer["channel"] == "sms" and "fallback" not in answer
    assert db.run("SELECT role, channel, policy FROM delivery_intents") == [["primary", "sms", "single"]]


def test_the_read_api_reports_each_step_in_order(create_app, db):
    client = create_app()
    verification_id = post_create(client, STEPS, "k1").get_json()["verification_id"]
    deliveries = client.get(f"/{verification_id}").get_json()["deliveries"]
    assert [(d["step"], d["channel"], d["after_seconds"], d["status"]) for d in deliveries] == [
        (1, "email", 0, "ready"),
        (2, "sms", 30, "ready"),
    ]


SMS = {"channel": "sms", "destination": "+14155550100", "after_seconds": 30}
EMAIL = {"channel": "email", "destination": "ada@example.com"}


@pytest.mark.parametrize(
    "body, pointer",
    [
        ({"steps": []}, "#/steps"),
        ({"steps": [EMAIL, {**SMS, "channel": "email", "destination": "b@example.com"}]}, "#/steps"),
        ({"steps": [EMAIL, SMS, {**SMS, "destination": "+14155550101"}]}, "#/steps"),
        ({"steps": [EMAIL, SMS, *[{**SMS, "destination": f"+1415555010{i}"} for i in (1, 2)]]}, "#/steps"),
        ({"steps": [{**EMAIL, "after_seconds": 5}, SMS]}, "#/steps"),
        ({"steps": [EMAIL, {**SMS, "after_seconds": 600}]}, "#/steps/1/after_seconds"),
        ({"steps": [EMAIL, {**SMS, "destination": "+1415"}]}, "#/steps/1/destination"),
        ({"steps": [EMAIL, {**SMS, "x": 1}]}, "#/steps/1/x"),
        ({"steps": [EMAIL], "channel": "email"}, "#/steps"),
        ({"steps": [EMAIL], "fallback": SMS}, "#/steps"),
        ({"steps": "email"}, "#/steps"),
        ({}, "#/channel"),
    ],
)
def test_bad_steps_are_field_errors_and_write_nothing(create_app, db, body, pointer):
    response = post_create(create_app(VERIFICATION_TTL_SECONDS="600"), {"account_id": "a", **body}, "k1")
    assert response.status_code == 400 and response.mimetype == "application/problem+json"
    assert pointer in [e["pointer"] for e in response.get_json()["errors"]], response.get_json()
    assert "+14155550100" not in response.get_data(as_text=True)
    assert written(db) == (0, 0, 0, 0)


def test_a_later_steps_refusal_points_at_that_step(create_app, db):
    client = create_app(SMS_ALLOWED_COUNTRIES="US")
    body = {"account_id": "a", "steps": [EMAIL, {**SMS, "destination": "+33612345678"}]}
    problem = post_create(client, body, "k1").get_json()
    assert problem["type"].endswith("/sms-country-not-allowed")
    assert problem["errors"][0]["pointer"] == "#/steps/1/destination"
    body = {"account_id": "a", "steps": [{**SMS, "destination": "+33612345678", "after_seconds": 0}]}
    assert post_create(client, body, "k2").get_json()["errors"][0]["pointer"] == "#/steps/0/destination"
    assert written(db) == (0, 0, 0, 0)
