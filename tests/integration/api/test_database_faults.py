"""Database faults during a request: a dropped connection or a stuck statement answers 503
problem+json with Retry-After, leaves no partial rows, and the next request works (reconnect)."""

from __future__ import annotations

import threading
import time

import pytest

from signup_verification import runtime
from signup_verification.platform.database import ConnectionParams, Database, UnavailableError

BODY = {"account_id": "acct-1", "channel": "email", "destination": "victim@example.com"}
# The per-account lock create_verification takes: holding it parks a create
# mid-transaction, after it has written its idempotency row. (The per-destination lock is keyed by a
# keyed digest, so the account's is the one a test can name.)
LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtextextended('account:acct-1', 0))"


def _count_rows(db) -> tuple[int, int, int]:
    return tuple(
        db.run(
            "SELECT (SELECT count(*) FROM idempotency_keys), (SELECT count(*) FROM verifications),"
            " (SELECT count(*) FROM delivery_intents)"
        )[0]
    )


def _create_in_thread(client, key: str) -> tuple[threading.Thread, dict]:
    result: dict = {}

    def call() -> None:
        result["response"] = client.post("/", json=BODY, headers={"Idempotency-Key": key})

    thread = threading.Thread(target=call)
    thread.start()
    return thread, result


def _wait_for_lock_waiter(db, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = db.run(
            "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND application_name LIKE 'signup-verification:%' AND datname = current_database()"
        )
        if rows:
            return rows[0][0]
        time.sleep(0.02)
    activity = db.rows(
        "SELECT application_name, wait_event_type, state, left(query, 60) AS q FROM pg_stat_activity"
        " WHERE datname = current_database()"
    )
    raise AssertionError(f"the create request never reached the destination lock: {activity}")


def _assert_unavailable(response) -> None:
    assert response.status_code == 503
    assert response.headers["Content-Type"] == "application/problem+json"
    assert int(response.headers["Retry-After"]) > 0
    body = response.get_json()
    assert body["status"] == 503 and body["type"].endswith("/service-unavailable")
    assert "Traceback" not in response.get_data(as_text=True)


def test_connection_dropped_mid_transaction_answers_503_and_writes_nothing(app_client, db, database_url):
    from signup_verification.platform.database import Database

    client = app_client("create_verification")
    holder = Database.from_url(database_url)
    with holder.transaction():
        holder.run(LOCK_SQL)
        thread, result = _create_in_thread(client, "drop-1")
        pid = _wait_for_lock_waiter(db)
        # The create transaction has already inserted its idempotency row; kill it mid-way.
        db.run("SELECT pg_terminate_backend(:pid)", pid=pid)
        thread.join(10)
    holder.close()
    _assert_unavailable(result["response"])
    assert _count_rows(db) == (0, 0, 0)
    # The same key works on the next request: the function reconnects.
    retry = client.post("/", json=BODY, headers={"Idempotency-Key": "drop-1"})
    assert retry.status_code == 201
    assert _count_rows(db) == (1, 1, 1)


def test_statement_timeout_bounds_a_stuck_request(app_client, db, database_url, monkeypatch):
    from signup_verification.platform.database import Database

    monkeypatch.setenv("DATABASE_STATEMENT_TIMEOUT_MS", "300")
    runtime.reset()
    client = app_client("create_verification")
    holder = Database.from_url(database_url)
    with holder.transaction():
        holder.run(LOCK_SQL)
        started = time.monotonic()
        response = client.post("/", json=BODY, headers={"Idempotency-Key": "stuck-1"})
        waited = time.monotonic() - started
    holder.close()
    _assert_unavailable(response)
    assert waited < 5, "the statement timeout did not cut the stuck request short"
    assert _count_rows(db) == (0, 0, 0)
    assert client.post("/", json=BODY, headers={"Idempotency-Key": "stuck-1"}).status_code == 201


def test_unreachable_database_answers_503(app_client, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@/nowhere?host=/nonexistent-socket-dir")
    runtime.reset()
    response = app_client("create_verification").post("/", json=BODY, headers={"Idempotency-Key": "k"})
    _assert_unavailable(response)


def test_a_connection_ended_before_its_session_setup_is_unavailable_and_the_next_use_reconnects(db, database_url):
    """A server shutting down may take a connection and end it before its SET statements ran: that is
    the database unavailable (a 503 at the edge, a retry in a worker), never a raw driver error."""
    params = ConnectionParams.from_url(database_url)
    ended = []

    def connector():  # the seam a Cloud SQL connector fills: the server ends the first connection at once
        con = params.connect("setup-ended")
        if not ended:
            [[pid]] = con.run("SELECT pg_backend_pid()")
            ended.append(db.run("SELECT pg_terminate_backend(:p, 5000)", p=pid)[0][0])
        return con

    target = Database(params, connector=connector)
    try:
        with pytest.raises(UnavailableError, match="connection lost"):
            target.run("SELECT 1")
        assert ended == [True]
        assert target.run("SHOW statement_timeout") == [["15s"]]  # connected again, set up this time
    finally:
        target.close()
