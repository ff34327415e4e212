"""Attacks against create, rerun through the HTTP stack: each gets its 4xx and leaves nothing
written (no verification, no intent, no idempotency record, no create event); a refusal that tells
about someone else leaves only its count against the caller (`refused`)."""

from __future__ import annotations

import pytest

from signup_verification.delivery import reports
from signup_verification.outbox.config import FailurePolicy
from support.factories import deliver, written
from support.signup_requests import post_create

SMS = {"account_id": "acct-1", "channel": "sms", "destination": "+14155550100"}


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
def test_premium_satellite_and_foreign_numbers_are_refused_and_nothing_is_written(create_app, db, number, slug):
    client = create_app(SMS_ALLOWED_COUNTRIES="US,GB")
    assert_refused(post_create(client, {**SMS, "destination": number}, "k1"), 422, slug)
    assert written(db) == (0, 0, 0, 0)


def test_landlines_are_refused_unless_allowed_by_type(create_app, db):
    landline = {**SMS, "destination": "+442071234567"}
    assert_refused(
        post_create(create_app(SMS_ALLOWED_COUNTRIES="GB"), landline, "k1"), 422, "sms-number-type-not-allowed"
    )
    allowed = create_app(SMS_ALLOWED_COUNTRIES="GB", SMS_ALLOWED_NUMBER_TYPES="mobile,fixed_line")
    assert post_create(allowed, landline, "k2").status_code == 201


@pytest.mark.parametrize(
    "variant", ["victim+1@gmail.com", "v.ictim@gmail.com", "victim@googlemail.com", "V.I.C.T.I.M+news@GoogleMail.com"]
)
def test_plus_tags_dots_and_googlemail_share_one_allowance(create_app, db, variant):
    client = create_app()
    assert (
        post_create(
            client, {"account_id": "a", "channel": "email", "destination": "victim@gmail.com"}, "k1"
        ).status_code
        == 201
    )
    response = post_create(client, {"account_id": "b", "channel": "email", "destination": variant}, "k2")
    assert_refused(response, 429, "rate-limited")
    assert written(db) == (1, 1, 1, 1)


@pytest.mark.parametrize(
    "first, alias",
    [
        ("victim+1@contoso-corp.com", "victim+2@contoso-corp.com"),  # a Microsoft 365 domain, on no list
        ("Victim@contoso-corp.com", "victim+news@CONTOSO-CORP.com"),
        ("ada+a@bücher.de", "ADA+b@xn--bcher-kva.de"),  # an IDN domain, in either of its forms
    ],
)
def test_two_plus_tag_aliases_of_one_mailbox_on_any_domain_share_its_allowance(create_app, db, first, alias):
    client = create_app(RATE_LIMIT_SPACING_SECONDS="0", RATE_LIMIT_PER_HOUR="1")
    body = {"account_id": "a", "channel": "email", "destination": first}
    assert post_create(client, body, "k1").status_code == 201
    assert_refused(post_create(client, {**body, "account_id": "b", "destination": alias}, "k2"), 429, "rate-limited")
    assert (
        post_create(client, {**body, "account_id": "c", "destination": "victim2@contoso-corp.com"}, "k3").status_code
        == 201
    )


def test_twelve_tagged_creates_to_one_corporate_mailbox_are_not_twelve_allowances(create_app, db):
    client = create_app(RATE_LIMIT_SPACING_SECONDS="0")  # 5 per hour per mailbox (the default)
    answers = [
        post_create(
            client, {"account_id": f"a{n}", "channel": "email", "destination": f"victim+{n}@contoso-corp.com"}, f"k{n}"
        )
        for n in range(12)
    ]
    assert [a.status_code for a in answers] == [201] * 5 + [429] * 7


def test_plus_tag_domains_narrows_the_fold(create_app, db):
    client = create_app(RATE_LIMIT_SPACING_SECONDS="0", RATE_LIMIT_PER_HOUR="1", PLUS_TAG_DOMAINS="gmail.com")
    first = {"account_id": "a", "channel": "email", "destination": "ada@example.org"}
    assert post_create(client, first, "k1").status_code == 201
    assert (
        post_create(client, {**first, "account_id": "b", "destination": "ada+x@example.org"}, "k2").status_code == 201
    )


def test_the_destination_key_is_a_keyed_digest_on_an_index(create_app, db):
    client = create_app()
    assert (
        post_create(
            client, {"account_id": "a", "channel": "email", "destination": "victim@gmail.com"}, "k1"
        ).status_code
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
def test_velocity_limits_answer_429_with_retry_after_and_store_nothing(create_app, db, setting, bodies):
    client = create_app(**{setting: "2"})
    assert [post_create(client, body, f"k{i}").status_code for i, body in enumerate(bodies[:2])] == [201, 201]
    refused = post_create(client, bodies[2], "k2")
    assert_refused(refused, 429, "rate-limited")
    assert 3500 <= int(refused.headers["Retry-After"]) <= 3600
    assert written(db) == (2, 2, 2, 2)
    assert not db.run("SELECT 1 FROM idempotency_keys WHERE key = 'k2'")


def test_a_country_limit_of_0_counts_no_country(create_app, db):
    """The standard and large tiers' setting: no per-country window is read or written (each SMS create
    would otherwise read up to the limit's many creates of the country); the other limits still hold."""
    client = create_app(RATE_LIMIT_COUNTRY_PER_HOUR="0", RATE_LIMIT_PREFIX_PER_HOUR="2")
    numbers = ["+14155550100", "+12015550123", "+16505550111", "+13125550199"]
    answers = [
        post_create(client, {"account_id": f"c{i}", "channel": "sms", "destination": n}, f"k{i}")
        for i, n in enumerate(numbers)
    ]
    assert [a.status_code for a in answers] == [201, 201, 201, 201]
    assert db.run("SELECT count(*) FROM create_events WHERE country IS NOT NULL") == [[0]]
    same_prefix = [post_create(client, {"account_id": f"p{i}", "channel": "sms", "destination": f"+1415555010{i + 1}"}, f"p{i}") for i in range(2)]  # fmt: skip
    assert [a.status_code for a in same_prefix] == [201, 429]  # the prefix limit (2) still counts


def test_another_ipv6_network_or_no_client_ip_is_counted_apart(create_app, db):
    client = create_app(RATE_LIMIT_CLIENT_PER_HOUR="1")
    body = {"account_id": "a", "channel": "email", "destination": "u1@example.com", "client_ip": "2001:db8:0:1::1"}
    assert post_create(client, body, "k1").status_code == 201
    assert (
        post_create(
            client, {**body, "account_id": "b", "destination": "u2@example.com", "client_ip": "2001:db8:0:2::1"}, "k2"
        ).status_code
        == 201
    )
    assert (
        post_create(client, {"account_id": "c", "channel": "email", "destination": "u3@example.com"}, "k3").status_code
        == 201
    )


def test_coarse_retry_after_hides_when_the_destination_asked(create_app, db):
    client = create_app(RATE_LIMIT_RETRY_AFTER="coarse")
    assert post_create(client, SMS, "k1").status_code == 201
    refused = post_create(client, {**SMS, "account_id": "other"}, "k2")
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "900"
    assert "53" not in refused.get_json().get("detail", "") and "900" in refused.get_json()["detail"]


@pytest.mark.parametrize("account_id", ["acct\u2028x", "acct\u2029x", "acct\u202ex", "acct\u200bx"])
def test_format_and_separator_characters_in_account_id_are_refused(create_app, db, account_id):
    assert_refused(post_create(create_app(), {**SMS, "account_id": account_id}, "k1"), 400, "invalid-request")
    assert written(db) == (0, 0, 0, 0)


@pytest.mark.parametrize("client_ip", ["300.1.1.1", "example.com", "2001:db8::1/64", ""])
def test_a_malformed_client_ip_is_refused(create_app, db, client_ip):
    assert_refused(post_create(create_app(), {**SMS, "client_ip": client_ip}, "k1"), 400, "invalid-request")
    assert written(db) == (0, 0, 0, 0)


# -- refusals that tell about someone else cost the caller ------------------------------------------
def _bounced(db, client, *addresses: str) -> None:
    """Each address created by its owner, sent, and hard-bounced: on the suppression list."""
    for n, address in enumerate(addresses):
        body = {"account_id": f"owner-{n}", "channel": "email", "destination": address}
        assert post_create(client, body, f"owner-{n}").status_code == 201
    for intent_id in deliver(db):
        bounce = reports.Observation(dedup_key=f"ev-{intent_id}", event="bounce", intent_id=intent_id,
                                     attempt_id=f"{intent_id}:1", detail="bounce 5.1.1", permanent=True,
                                     fault="recipient", category="bounced", code="5.1.1")  # fmt: skip
        assert reports.ingest(db, "sendgrid", [bounce], FailurePolicy()).suppressed == 1


def refused_counts(db) -> list[tuple]:
    return [tuple(r) for r in db.run(
        "SELECT account_id, client_key IS NOT NULL, destination_key IS NULL AND prefix_key IS NULL AND country IS NULL"
        " FROM create_events WHERE role = 'refused' ORDER BY created_at"
    )]  # fmt: skip


def test_probing_the_suppression_list_spends_the_callers_own_allowance(create_app, db):
    """Each `422 destination-suppressed` costs the asking client a create: after its allowance it
    hears 429 whatever it asks about, so the list cannot be read out faster than the limits allow."""
    client = create_app(RATE_LIMIT_CLIENT_PER_HOUR="3", RATE_LIMIT_SPACING_SECONDS="0")
    _bounced(db, client, "gone1@example.com", "gone2@example.com", "gone3@example.com", "gone4@example.com")
    probe = {"channel": "email", "client_ip": "198.51.100.7"}
    answers = [
        post_create(client, {**probe, "account_id": f"probe-{n}", "destination": f"gone{n}@example.com"}, f"p{n}")
        for n in (1, 2, 3, 4)
    ]
    assert [a.status_code for a in answers] == [422, 422, 422, 429]
    assert answers[3].get_json()["type"].endswith("/rate-limited")  # gone4 bounced too: not told
    assert refused_counts(db) == [(f"probe-{n}", True, True) for n in (1, 2, 3)]  # no destination kept
    fresh = post_create(client, {**probe, "account_id": "probe-5", "destination": "new@example.com"}, "p5")
    assert fresh.status_code == 429  # the client's allowance is spent on the probes
    other = post_create(
        client, {**probe, "client_ip": "203.0.113.1", "account_id": "x", "destination": "n@example.com"}, "o"
    )
    assert other.status_code == 201  # another client's is not


def test_the_suppression_answers_count_against_the_account_too(create_app, db):
    client = create_app(RATE_LIMIT_ACCOUNT_PER_HOUR="2", RATE_LIMIT_SPACING_SECONDS="0")
    _bounced(db, client, "gone1@example.com", "gone2@example.com")
    probe = {"account_id": "prober", "channel": "email"}
    codes = [
        post_create(client, {**probe, "destination": f"gone{n}@example.com"}, f"p{n}").status_code for n in (1, 2, 1)
    ]
    assert codes == [422, 422, 429]
    assert len(refused_counts(db)) == 2  # the 429 of its own limit is not counted again


def test_a_429_about_another_destination_costs_the_caller_and_its_own_429_does_not(create_app, db):
    client = create_app(RATE_LIMIT_CLIENT_PER_HOUR="3")  # the victim's address: 60 s between creates
    assert (
        post_create(
            client, {"account_id": "victim", "channel": "email", "destination": "v@example.com"}, "v"
        ).status_code
        == 201
    )
    probe = {"channel": "email", "client_ip": "198.51.100.7"}
    asked = post_create(client, {**probe, "account_id": "p0", "destination": "v@example.com"}, "p0")
    assert asked.status_code == 429  # "this address asked within the minute": an answer about the victim
    assert [
        post_create(
            client, {**probe, "account_id": f"p{n}", "destination": f"mine{n}@example.com"}, f"p{n}"
        ).status_code
        for n in (1, 2, 3)
    ] == [201, 201, 429]  # the probe took one of the client's three creates
    assert refused_counts(db) == [("p0", True, True)]
