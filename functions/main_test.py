"""create_verification through the real HTTP stack (functions-framework's Flask app) on a real PostgreSQL.

Every answer is checked against the database: exactly one verification + intent + key per accepted
key, nothing at all for a rejected request. Races, faults and rate limits: tests/test_create_races.py.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import uuid

import pytest

from signup_verification.api.problems import PROBLEM_BASE
from signup_verification.runtime import get_runtime
from support.factories import STORED_ANSWER

EMAIL = {"account_id": "acct_42", "channel": "email", "destination": "ada@example.com"}
SMS = {"account_id": "acct_42", "channel": "sms", "destination": "+14155550100"}


@pytest.fixture
def client(app_client):
    return app_client("create_verification")


def post(client, body, key: str | None = "signup-42", **kwargs):
    headers = {} if key is None else {"Idempotency-Key": key}
    if isinstance(body, (dict, list)):
        return client.post("/", json=body, headers=headers, **kwargs)
    return client.post("/", data=body, headers=headers, **kwargs)


def row_counts(db) -> tuple[int, int, int]:
    return tuple(
        db.run(
            "SELECT (SELECT count(*) FROM verifications)::int,"
            " (SELECT count(*) FROM delivery_intents)::int,"
            " (SELECT count(*) FROM idempotency_keys)::int"
        )[0]
    )


def assert_problem(response, status: int, *pointers: str) -> dict:
    """RFC 9457 shape, the expected status and per-field pointers; never a trace or driver text."""
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == "application/problem+json"
    body = json.loads(response.get_data(as_text=True))
    assert body["type"].startswith(PROBLEM_BASE) and body["title"] and body["status"] == status
    text = response.get_data(as_text=True)
    for leak in ("Traceback", 'File "', "pg8000", "pydantic", "Exception", "errors.pydantic.dev"):
        assert leak not in text
    if pointers:
        assert sorted(e["pointer"] for e in body["errors"]) == sorted(pointers)
        assert all(e["detail"] for e in body["errors"])
    return body


@contextlib.contextmanager
def case(name):
    """One table row of a table-driven test (one database for the table): failures name the row."""
    try:
        yield
    except AssertionError as exc:
        raise AssertionError(f"case {name!r}: {exc}") from exc


def parse_time(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


# -- created ------------------------------------------------------------------------------------------


def test_create_answers_201_with_the_public_fields_and_writes_one_row_set(client, db):
    response = post(client, {**EMAIL, "destination": "Ada@EXAMPLE.com", "locale": "ja-JP"})
    assert response.status_code == 201 and response.mimetype == "application/json"
    assert "Idempotent-Replayed" not in response.headers
    body = response.get_json()
    assert set(body) == {"verification_id", "account_id", "channel", "status", "expires_at", "created_at"}
    assert body["account_id"] == "acct_42" and body["channel"] == "email" and body["status"] == "pending"
    created, expires = parse_time(body["created_at"]), parse_time(body["expires_at"])
    assert created.tzinfo is not None and expires - created == dt.timedelta(seconds=600)

    assert row_counts(db) == (1, 1, 1)
    verification = db.one("SELECT * FROM verifications")
    assert str(verification["id"]) == body["verification_id"]
    assert verification["destination"] == "Ada@example.com"  # domain normalised, local part kept
    assert verification["status"] == "pending" and verification["key_id"] == "test-k1"
    intent = db.one("SELECT * FROM delivery_intents")
    assert intent["verification_id"] == verification["id"] and intent["status"] == "ready"
    assert (intent["template_version"], intent["locale"]) == ("signup/v2", "ja")  # the newest version
    key = db.one(STORED_ANSWER, key="signup-42")
    assert key["key"] == "signup-42" and key["outcome"] == "created" and key["answer"] == body  # replayable


def test_sms_destination_is_stored_in_e164(client, db):
    response = post(client, {**SMS, "destination": "+1 (415) 555-0100"})
    assert response.status_code == 201
    assert db.one("SELECT destination FROM verifications")["destination"] == "+14155550100"


@pytest.mark.parametrize("request_body", [EMAIL, SMS], ids=["email", "sms"])
def test_no_token_code_nonce_or_digest_in_the_response_or_database_text(client, db, request_body):
    response = post(client, request_body)
    assert response.status_code == 201
    row = db.one("SELECT id, key_id, token_nonce, token_digest FROM verifications")
    key = get_runtime().keyring.get(row["key_id"])
    if request_body["channel"] == "email":
        secret = key.link_token(row["id"], row["token_nonce"])
        assert key.link_digest(secret) == row["token_digest"]
    else:
        secret = key.sms_code(row["id"], row["token_nonce"])
        assert key.code_digest(row["id"], secret) == row["token_digest"]
    answer = response.get_data(as_text=True) + str(response.headers)
    material = [
        row["token_nonce"].hex(),
        base64.urlsafe_b64encode(row["token_nonce"]).decode().rstrip("="),
        row["token_digest"].hex(),
        base64.b64encode(row["token_digest"]).decode(),
    ]
    if request_body["channel"] == "email":
        material.append(secret)
    assert not [m for m in material if m in answer]
    assert secret not in response.get_json().values()
    # No text column anywhere holds the token: the database keeps nonce + digest only.
    dump = "".join(
        r[0]
        for r in db.run(
            "SELECT row_to_json(t)::text FROM verifications t UNION ALL SELECT row_to_json(t)::text FROM delivery_intents t"
            " UNION ALL SELECT row_to_json(t)::text FROM idempotency_keys t"
        )
    )
    assert (secret if request_body["channel"] == "email" else f'"{secret}"') not in dump


# -- idempotency --------------------------------------------------------------------------------------


def test_same_key_same_body_replays_the_first_answer_and_writes_nothing(client, db):
    first = post(client, EMAIL)
    replay = post(client, EMAIL)
    assert replay.status_code == 201 and replay.headers["Idempotent-Replayed"] == "true"
    assert replay.get_json() == first.get_json()
    assert row_counts(db) == (1, 1, 1)


def test_an_equivalent_body_is_the_same_request(client, db):
    """Field order, surrounding spaces and domain case do not make a new request."""
    first = post(client, EMAIL)
    variant = '{"destination": "  ada@EXAMPLE.COM ", "channel": "email", "account_id": "acct_42", "template": "signup"}'
    replay = post(client, variant, content_type="application/json")
    assert replay.headers.get("Idempotent-Replayed") == "true"
    assert replay.get_json()["verification_id"] == first.get_json()["verification_id"]
    assert row_counts(db) == (1, 1, 1)


def test_same_key_different_body_is_422_and_the_key_keeps_its_first_answer(client, db):
    first = post(client, EMAIL)
    body = assert_problem(post(client, {**EMAIL, "destination": "bob@example.com"}), 422)
    assert "bob" not in json.dumps(body)
    assert row_counts(db) == (1, 1, 1)
    assert post(client, EMAIL).get_json() == first.get_json()


BAD_KEYS = {
    "missing": None,
    "empty": "",
    "blank": "   ",
    "256-chars": "k" * 256,
    "DEL": "bad\x7fkey",
    "non-ascii": "caf\u00e9",
    "tab": "tab\there",
}


def test_missing_or_invalid_idempotency_key_is_400(client, db):
    for name, key in BAD_KEYS.items():
        with case(name):
            body = assert_problem(post(client, EMAIL, key=key), 400, "header/Idempotency-Key")
            assert "Idempotency-Key" in body["detail"]
    assert row_counts(db) == (0, 0, 0)


def test_any_printable_ascii_key_of_1_to_255_is_accepted(client, db):
    keys = ["k", "k" * 255, "order 42 / signup", "~!@#$%^&*()_+{}|:<>?"]
    for n, key in enumerate(keys):
        with case(key):
            body = {**EMAIL, "destination": f"user{n}@example.com", "account_id": f"a{n}"}
            assert post(client, body, key=key).status_code == 201
    assert sorted(r[0] for r in db.run("SELECT key FROM idempotency_keys")) == sorted(keys)


# -- rejected input: problem+json, never a 5xx, nothing written ---------------------------------------

BAD_BODIES = {
    "malformed-json": ('{"account_id": "a",', ()),
    "not-utf8": (b'{"account_id": "\xff"}', ()),
    "array": ("[]", ()),
    "null": ("null", ()),
    "deeply-nested": ("[" * 5000 + "]" * 5000, ()),
    "huge-integer": ('{"account_id": ' + "9" * 5000 + "}", ()),
    "wrong-types": (
        '{"account_id": 42, "channel": true, "destination": ["a@example.com"], "locale": 5}',
        ("#/account_id", "#/channel", "#/destination", "#/locale"),
    ),
    "no-coercion": (
        '{"account_id": "a", "channel": "email", "destination": "a@example.com", "template": null}',
        ("#/template",),
    ),
    "missing-fields": ("{}", ("#/account_id", "#/channel", "#/destination")),
    "unknown-field": (
        '{"account_id": "a", "channel": "email", "destination": "a@example.com", "token": "x"}',
        ("#/token",),
    ),
    "unknown-channel": ('{"account_id": "a", "channel": "fax", "destination": "+14155550100"}', ("#/channel",)),
    "email-no-at": ('{"account_id": "a", "channel": "email", "destination": "ada.example.com"}', ("#/destination",)),
    "email-bad-domain": (
        '{"account_id": "a", "channel": "email", "destination": "ada@example..com"}',
        ("#/destination",),
    ),
    "email-too-long": (
        '{"account_id": "a", "channel": "email", "destination": "' + "a" * 400 + '@example.com"}',
        ("#/destination",),
    ),
    "phone-no-plus": ('{"account_id": "a", "channel": "sms", "destination": "4155550100"}', ("#/destination",)),
    "phone-invalid": ('{"account_id": "a", "channel": "sms", "destination": "+1555"}', ("#/destination",)),
    "phone-unassigned": ('{"account_id": "a", "channel": "sms", "destination": "+10005550100"}', ("#/destination",)),
    "phone-letters": ('{"account_id": "a", "channel": "sms", "destination": "+1-CALL-NOW"}', ("#/destination",)),
    "email-to-sms": ('{"account_id": "a", "channel": "sms", "destination": "ada@example.com"}', ("#/destination",)),
    "unknown-template": (
        '{"account_id": "a", "channel": "email", "destination": "a@example.com", "template": "x"}',
        ("#/template",),
    ),
    "bad-locale": (
        '{"account_id": "a", "channel": "email", "destination": "a@example.com", "locale": "en_US!"}',
        ("#/locale",),
    ),
    "control-in-account": (
        '{"account_id": "a\\u0000b", "channel": "email", "destination": "a@example.com"}',
        ("#/account_id",),
    ),
    "blank-account": ('{"account_id": "   ", "channel": "email", "destination": "a@example.com"}', ("#/account_id",)),
    "long-account": (
        '{"account_id": "' + "a" * 256 + '", "channel": "email", "destination": "a@example.com"}',
        ("#/account_id",),
    ),
}


def test_bad_body_is_400_with_field_errors_and_writes_nothing(client, db):
    for name, (raw, pointers) in BAD_BODIES.items():
        with case(name):
            assert_problem(post(client, raw, content_type="application/json"), 400, *pointers)
    assert row_counts(db) == (0, 0, 0)


def test_field_errors_do_not_echo_the_destination(client, db):
    response = post(client, {**EMAIL, "destination": "zq-unique-local@@example.com"})
    assert_problem(response, 400, "#/destination")
    assert "zq-unique-local" not in response.get_data(as_text=True)


def test_oversized_body_is_413(client, db):
    body = {**EMAIL, "account_id": "a" * 20_000}
    assert_problem(post(client, body), 413)
    assert row_counts(db) == (0, 0, 0)


def test_wrong_content_type_is_415(client, db):
    for content_type in (None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        with case(content_type):
            kwargs = {"content_type": content_type} if content_type else {}
            assert_problem(post(client, json.dumps(EMAIL), **kwargs), 415)
    assert row_counts(db) == (0, 0, 0)


def test_json_with_charset_parameter_is_accepted(client):
    response = post(client, json.dumps(EMAIL), content_type="application/json; charset=utf-8")
    assert response.status_code == 201


def test_wrong_method_is_405_with_allow(client, db):
    for method in ("GET", "PUT", "PATCH", "DELETE"):
        with case(method):
            response = client.open("/", method=method, json=EMAIL, headers={"Idempotency-Key": "signup-42"})
            assert_problem(response, 405)
            assert response.headers["Allow"] == "POST"
    assert row_counts(db) == (0, 0, 0)


def test_unreachable_database_is_503_with_retry_after(client, monkeypatch):
    from signup_verification import runtime

    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/nothing")
    runtime.reset()
    response = post(client, EMAIL)
    assert_problem(response, 503)
    assert int(response.headers["Retry-After"]) > 0


# -- supersede ----------------------------------------------------------------------------------------


def test_new_verification_supersedes_the_accounts_pending_one_on_that_channel(client, db):
    first = post(client, EMAIL, key="k1").get_json()
    other_channel = post(client, SMS, key="k2").get_json()
    eve = {**EMAIL, "account_id": "acct_7", "destination": "eve@example.com"}
    other_account = post(client, eve, key="k3").get_json()
    second = post(client, {**EMAIL, "destination": "ada@work.example.com"}, key="k4").get_json()

    rows = {
        str(r["id"]): r
        for r in db.rows(
            "SELECT v.id, v.status, v.superseded_by, i.status AS intent_status, i.suppression_reason, i.completed_at"
            " FROM verifications v JOIN delivery_intents i ON i.verification_id = v.id"
        )
    }
    old = rows[first["verification_id"]]
    assert old["status"] == "superseded" and str(old["superseded_by"]) == second["verification_id"]
    assert old["intent_status"] == "suppressed" and old["suppression_reason"] == "superseded"
    assert old["completed_at"] is not None
    for untouched in (other_channel, other_account, second):
        assert rows[untouched["verification_id"]]["status"] == "pending"
        assert rows[untouched["verification_id"]]["intent_status"] == "ready"
    # Replaying the first key still answers what it answered then.
    assert post(client, EMAIL, key="k1").get_json() == first


def test_supersede_leaves_an_already_sent_intent_as_it_was(client, db):
    first = post(client, EMAIL, key="k1").get_json()
    db.run("UPDATE delivery_intents SET status = 'accepted', completed_at = now(), provider_ref = 'msg-1'")
    post(client, {**EMAIL, "destination": "ada@work.example.com"}, key="k2")
    row = db.one(
        "SELECT v.status, i.status AS intent_status, i.provider_ref FROM verifications v"
        " JOIN delivery_intents i ON i.verification_id = v.id WHERE v.id = :id",
        id=uuid.UUID(first["verification_id"]),
    )
    assert row == {"status": "superseded", "intent_status": "accepted", "provider_ref": "msg-1"}
