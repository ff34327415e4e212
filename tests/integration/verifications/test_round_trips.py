"""Round trips are designed, not hoped for: count the network flushes pg8000 makes per operation."""

from __future__ import annotations

from contextlib import contextmanager

import pg8000.core


@contextmanager
def count_round_trips():
    """Every pg8000 round trip ends with one flush of the socket followed by reading the answer."""
    counter = {"n": 0}
    original = pg8000.core._flush

    def counting_flush(sock):
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

