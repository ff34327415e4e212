"""Round trips are designed, not hoped for: count the network flushes pg8000 makes per operation."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import pg8000.core


@contextmanager
def count_round_trips():
    """Every pg8000 round trip ends with one flush of the socket followed by reading the answer. Only
    this thread's are counted: the test database's clone pool runs statements from threads of its own."""
    counter = {"n": 0}
    original = pg8000.core._flush
    measured = threading.get_ident()

    def counting_flush(sock):
        if threading.get_ident() == measured:
            counter["n"] += 1
        return original(sock)

    pg8000.core._flush = counting_flush
    try:
        yield counter
    finally:
        pg8000.core._flush = original


def test_create_is_one_round_trip_once_warm(app_client):
    client = app_client("create_verification")
    body = {"account_id": "a", "channel": "email", "destination": "first@example.com"}
    assert client.post("/", json=body, headers={"Idempotency-Key": "warm"}).status_code == 201
    with count_round_trips() as trips:
        response = client.post(
            "/",
            json={**body, "account_id": "b", "destination": "second@example.com"},
            headers={"Idempotency-Key": "measured"},
        )
    assert response.status_code == 201
    assert trips["n"] == 1, f"create took {trips['n']} round trips"
    with count_round_trips() as trips:
        replay = client.post(
            "/",
            json={**body, "account_id": "b", "destination": "second@example.com"},
            headers={"Idempotency-Key": "measured"},
        )
    assert replay.headers["Idempotent-Replayed"] == "true" and trips["n"] == 1


def test_confirming_a_link_is_one_round_trip_with_a_cached_generic_plan(db):
    """Find and consume in one statement (verifications/queries/confirm.sql:confirm_link): no look-up first, and the
    plan is not re-made per call (after PostgreSQL's five custom plans, the generic one is used)."""
    import uuid

    from signup_verification.api.create import create_verification
    from signup_verification.api.models import CreateVerificationRequest
    from signup_verification.config import load
    from signup_verification.verifications import confirm as confirmations
    from signup_verification.verifications.tokens import Keyring
    from support.paths import TEST_TOKEN_KEYS

    keyring = Keyring.parse(TEST_TOKEN_KEYS)
    tokens = []
    for i in range(8):
        request = CreateVerificationRequest(account_id=f"c{i}", channel="email", destination=f"c{i}@example.com")
        created = create_verification(db, load().create, keyring, request, f"confirm-{i}")
        row = db.one(
            "SELECT id, key_id, token_nonce FROM verifications WHERE id = :id",
            id=uuid.UUID(created.body["verification_id"]),
        )
        tokens.append(keyring.get(row["key_id"]).link(row["id"], bytes(row["token_nonce"])))
    results, trips = [], []
    for token in tokens:
        with count_round_trips() as counted:
            results.append(confirmations.confirm_link(db, keyring, token).result)
        trips.append(counted["n"])
    assert results == [confirmations.VERIFIED] * 8
    assert trips[1:] == [1] * 7, f"round trips per confirm once warm: {trips}"
    [plans] = db.run(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE '-- confirm a link:%'"
    )
    assert plans[0] >= 2, f"generic/custom plans: {plans}"
    again = confirmations.confirm_link(db, keyring, tokens[0])
    assert again.result == confirmations.ALREADY_VERIFIED


def test_a_later_proof_costs_the_round_trips_a_first_one_does(db):
    """After the SMS code verified it, the email's link proves the address in its one statement, and the
    code after the link in the code's two (its state, which says whether the SMS was sent, then the
    consuming UPDATE): a proof is no dearer."""
    from signup_verification.verifications import confirm as confirmations
    from support.dispatch import KEYRING
    from support.factories import SETTINGS
    from support.policy import create_with_fallback, sent
    from support.webhooks import link_token, sms_code

    def later(first: str, i: int) -> int:
        vid = create_with_fallback(
            db,
            SETTINGS.create,
            account=f"rt-{i}",
            email=f"rt{i}@example.com",
            phone=f"+1415555{i:04d}",
            after_seconds=0,
        )
        sent(db, vid, "sms")
        token, code = link_token(db, vid), sms_code(db, vid)
        if first == "code":
            confirmations.confirm_code(db, KEYRING, vid, code)
            with count_round_trips() as trips:
                assert confirmations.confirm_link(db, KEYRING, token).result == confirmations.VERIFIED
        else:
            confirmations.confirm_link(db, KEYRING, token)
            with count_round_trips() as trips:
                assert confirmations.confirm_code(db, KEYRING, vid, code).result == confirmations.VERIFIED
        return trips["n"]

    later("code", 0), later("link", 1)  # warm: the statements are prepared
    assert [later("code", 2), later("link", 3)] == [1, 2]
