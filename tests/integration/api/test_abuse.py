"""Attacks against create, rerun through the HTTP stack: each gets its 4xx and leaves
nothing written (no verification, no intent, no idempotency record, no create event)."""

from __future__ import annotations

import functools

import pytest

SMS = {"account_id": "acct-1", "channel": "sms", "destination": "+14155550100"}


@pytest.fixture
def create(configured_app):
    """create(**settings) -> a create_verification client configured with those variables."""
    return functools.partial(configured_app, "create_verification")


def post(client, body: dict, key: str):
    return client.post("/", json=body, headers={"Idempotency-Key": key})


def written(db) -> tuple[int, ...]:
    return tuple(
        db.run(
            "SELECT (SELECT count(*) FROM verifications)::int, (SELECT count(*) FROM delivery_intents)::int,"
            " (SELECT count(*) FROM idempotency_keys)::int, (SELECT count(*) FROM create_events)::int"
        )[0]
    )


def assert_refused(response, status: int, slug: str) -> None:
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == "application/problem+json"
    assert response.get_json()["type"].endswith("/" + slug)


@pytest.mark.parametrize(
    "number, slug",
    [
        ("+19002123456", "sms-number-type-not-allowed"),  # US premium-rate (900)
        ("+15005550006", "sms-number-type-not-allowed"),  # NANP personal number (500)
        ("+881234567890", "sms-country-not-allowed"),  # satellite: non-geographic region 001
        ("+33612345678", "sms-country-not-allowed"),  # a French mobile, France not allowed
    ],
)
def test_premium_satellite_and_foreign_numbers_are_refused_and_nothing_is_written(create, db, number, slug):
    client = create(SMS_ALLOWED_COUNTRIES="US,GB")
    assert_refused(post(client, {**SMS, "destination": number}, "k1"), 422, slug)
    assert written(db) == (0, 0, 0, 0)


def test_landlines_are_refused_unless_allowed_by_type(create, db):
    landline = {**SMS, "destination": "+442071234567"}
    assert_refused(post(create(SMS_ALLOWED_COUNTRIES="GB"), landline, "k1"), 422, "sms-number-type-not-allowed")
    allowed = create(SMS_ALLOWED_COUNTRIES="GB", SMS_ALLOWED_NUMBER_TYPES="mobile,fixed_line")
    assert post(allowed, landline, "k2").status_code == 201


@pytest.mark.parametrize(
    "variant", ["victim+1@gmail.com", "v.ictim@gmail.com", "victim@googlemail.com", "V.I.C.T.I.M+news@GoogleMail.com"]
)
def test_plus_tags_dots_and_googlemail_share_one_allowance(create, db, variant):
    client = create()
    assert (
        post(client, {"account_id": "a", "channel": "email", "destination": "victim@gmail.com"}, "k1").status_code
        == 201
    )
    response = post(client, {"account_id": "b", "channel": "email", "destination": variant}, "k2")
    assert_refused(response, 429, "rate-limited")
    assert written(db) == (1, 1, 1, 1)


def test_plus_tags_count_only_on_listed_domains_unless_all(create, db):
    client = create(RATE_LIMIT_SPACING_SECONDS="0", RATE_LIMIT_PER_HOUR="1")
    first = {"account_id": "a", "channel": "email", "destination": "ada@example.org"}
    assert post(client, first, "k1").status_code == 201
    assert post(client, {**first, "account_id": "b", "destination": "ada+x@example.org"}, "k2").status_code == 201
    client = create(RATE_LIMIT_SPACING_SECONDS="0", RATE_LIMIT_PER_HOUR="1", PLUS_TAG_DOMAINS="*")
    assert_refused(
        post(client, {**first, "account_id": "c", "destination": "ada+y@example.org"}, "k3"), 429, "rate-limited"
    )


def test_the_destination_key_is_a_keyed_digest_on_an_index(create, db):
    client = create()
    assert (
        post(client, {"account_id": "a", "channel": "email", "destination": "victim@gmail.com"}, "k1").status_code
        == 201
    )
    (key,) = db.run("SELECT destination_key FROM create_events")[0]
    assert len(key) == 32 and b"victim" not in bytes(key)
    with db.transaction() as tx:
        tx.run("SET LOCAL enable_seqscan = off")  # a one-row table: make the planner show its choice
        plan = tx.run(
            "EXPLAIN SELECT created_at FROM create_events WHERE channel = 'email'"
            " AND destination_key = :k AND created_at > now() - interval '1 hour'",
            k=bytes(key),
        )
    assert "create_events_destination" in " ".join(str(r[0]) for r in plan)


@pytest.mark.parametrize(
    "setting, bodies",
    [
        (
            "RATE_LIMIT_ACCOUNT_PER_HOUR",  # one account, any channel and destination
            [
                {**SMS, "destination": "+14155550100"},
                {"account_id": "acct-1", "channel": "email", "destination": "a@example.com"},
                {**SMS, "destination": "+12015550123"},
            ],
        ),
        (
            "RATE_LIMIT_PREFIX_PER_HOUR",  # +1415555010x: one prefix, many numbers
            [{"account_id": f"p{i}", "channel": "sms", "destination": f"+1415555010{i}"} for i in range(3)],
        ),
        (
            "RATE_LIMIT_COUNTRY_PER_HOUR",  # three prefixes, one country
            [
                {"account_id": f"c{i}", "channel": "sms", "destination": n}
                for i, n in enumerate(["+14155550100", "+12015550123", "+16505550111"])
            ],
        ),
        (
            "RATE_LIMIT_CLIENT_PER_HOUR",  # three IPv6 addresses of one /64
            [
                {
                    "account_id": f"i{i}",
                    "channel": "email",
                    "destination": f"u{i}@example.com",
                    "client_ip": f"2001:db8::{i + 1}",
                }
                for i in range(3)
            ],
        ),
    ],
)
def test_velocity_limits_answer_429_with_retry_after_and_store_nothing(create, db, setting, bodies):
    client = create(**{setting: "2"})
    assert [post(client, body, f"k{i}").status_code for i, body in enumerate(bodies[:2])] == [201, 201]
    refused = post(client, bodies[2], "k2")
    assert_refused(refused, 429, "rate-limited")
    assert 3500 <= int(refused.headers["Retry-After"]) <= 3600
    assert written(db) == (2, 2, 2, 2)
    assert not db.run("SELECT 1 FROM idempotency_keys WHERE key = 'k2'")


def test_another_ipv6_network_or_no_client_ip_is_counted_apart(create, db):
    client = create(RATE_LIMIT_CLIENT_PER_HOUR="1")
    body = {"account_id": "a", "channel": "email", "destination": "u1@example.com", "client_ip": "2001:db8:0:1::1"}
    assert post(client, body, "k1").status_code == 201
    assert (
        post(
            client, {**body, "account_id": "b", "destination": "u2@example.com", "client_ip": "2001:db8:0:2::1"}, "k2"
        ).status_code
        == 201
    )
    assert (
        post(client, {"account_id": "c", "channel": "email", "destination": "u3@example.com"}, "k3").status_code == 201
    )


def test_coarse_retry_after_hides_when_the_destination_asked(create, db):
    client = create(RATE_LIMIT_RETRY_AFTER="coarse")
    assert post(client, SMS, "k1").status_code == 201
    refused = post(client, {**SMS, "account_id": "other"}, "k2")
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "900"
    assert "53" not in refused.get_json().get("detail", "") and "900" in refused.get_json()["detail"]


@pytest.mark.parametrize("account_id", ["acct\u2028x", "acct\u2029x", "acct\u202ex", "acct\u200bx"])
def test_format_and_separator_characters_in_account_id_are_refused(create, db, account_id):
    assert_refused(post(create(), {**SMS, "account_id": account_id}, "k1"), 400, "invalid-request")
    assert written(db) == (0, 0, 0, 0)


@pytest.mark.parametrize("client_ip", ["300.1.1.1", "example.com", "2001:db8::1/64", ""])
def test_a_malformed_client_ip_is_refused(create, db, client_ip):
    assert_refused(post(create(), {**SMS, "client_ip": client_ip}, "k1"), 400, "invalid-request")
    assert written(db) == (0, 0, 0, 0)
