"""create_verification under races, faults and the per-destination rate limit, through the HTTP stack.

Races are made deterministic: a second connection holds a transaction open at the contended point,
the requests are started in threads (each with its own connection), and the test waits until
PostgreSQL reports them blocked before letting the holder go.
"""

from __future__ import annotations

import threading
import time

import pytest

from signup_verification import runtime
from signup_verification.api import create as verifications
from signup_verification.api.models import CreateVerificationRequest
from signup_verification.platform.database import Database
from support.signup_requests import post_create

EMAIL = {"account_id": "acct_42", "channel": "email", "destination": "ada@example.com"}


@pytest.fixture
def client(app_client):
    return app_client("create_verification")


def row_counts(db) -> tuple[int, int, int]:
    return tuple(
        db.run(
            "SELECT (SELECT count(*) FROM verifications)::int,"
            " (SELECT count(*) FROM delivery_intents)::int,"
            " (SELECT count(*) FROM idempotency_keys)::int"
        )[0]
    )


def age_all(db, seconds: int) -> None:
    """Move every verification `seconds` into the past (what waiting would do, without the wait)."""
    db.run(
        "UPDATE verifications SET created_at = created_at - make_interval(secs => :s),"
        " expires_at = expires_at - make_interval(secs => :s)",
        s=seconds,
    )
    # The velocity limits count create_events, which carry the same created_at.
    db.run("UPDATE create_events SET created_at = created_at - make_interval(secs => :s)", s=seconds)


def in_threads(app_client, calls: list[tuple[dict, str]]) -> tuple[list[threading.Thread], list]:
    """Start one HTTP request per thread; each thread gets its own app client and connection.
    The clients are built here: create_app compiles main.py, which is not safe to run concurrently."""
    results: list = [None] * len(calls)
    clients = [app_client("create_verification") for _ in calls]

    def worker(i: int, body: dict, key: str) -> None:
        results[i] = post_create(clients[i], body, key)

    threads = [threading.Thread(target=worker, args=(i, body, key)) for i, (body, key) in enumerate(calls)]
    for thread in threads:
        thread.start()
    return threads, results


def wait_blocked(db, count: int, threads: list[threading.Thread], timeout: float = 10.0) -> None:
    """Until `count` other backends of this database wait on a lock (or every thread has finished)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(t.is_alive() for t in threads):
        waiting = db.run(
            "SELECT count(*)::int FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )[0][0]
        if waiting >= count:
            return
        time.sleep(0.02)


def join(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive()


# -- rate limit ---------------------------------------------------------------------------------------


def test_second_create_within_60_s_is_429_and_is_not_stored_against_its_key(client, db):
    assert post_create(client, EMAIL, "k1").status_code == 201
    response = post_create(client, {**EMAIL, "account_id": "acct_other"}, "k2")
    assert response.status_code == 429 and response.mimetype == "application/problem+json"
    assert 55 <= int(response.headers["Retry-After"]) <= 60
    assert response.get_json()["status"] == 429
    assert row_counts(db) == (1, 1, 1)
    assert not db.rows("SELECT 1 FROM idempotency_keys WHERE key = 'k2'")
    age_all(db, 61)
    retried = post_create(client, {**EMAIL, "account_id": "acct_other"}, "k2")
    assert retried.status_code == 201 and "Idempotent-Replayed" not in retried.headers
    assert row_counts(db) == (2, 2, 2)


def test_sixth_create_within_the_hour_is_429_until_the_oldest_leaves_the_window(client, db):
    for n in range(5):
        assert post_create(client, {**EMAIL, "account_id": f"acct_{n}"}, f"k{n}").status_code == 201
        age_all(db, 120)  # 5 creations, 2 minutes apart, the oldest 10 minutes ago
    response = post_create(client, {**EMAIL, "account_id": "acct_5"}, "k5")
    assert response.status_code == 429
    assert 3000 - 2 <= int(response.headers["Retry-After"]) <= 3000  # the oldest frees its slot in 50 min
    assert row_counts(db) == (5, 5, 5)
    age_all(db, 3000)
    assert post_create(client, {**EMAIL, "account_id": "acct_5"}, "k5").status_code == 201


def test_the_limit_is_per_destination_whatever_its_case(client, db):
    assert post_create(client, EMAIL, "k1").status_code == 201
    assert post_create(client, {**EMAIL, "destination": "ADA@Example.com"}, "k2").status_code == 429
    assert post_create(client, {**EMAIL, "destination": "bob@example.com"}, "k3").status_code == 201


def test_replays_do_not_count_against_the_limit(client, db):
    first = post_create(client, EMAIL, "k0")
    for _ in range(10):
        replay = post_create(client, EMAIL, "k0")
        assert replay.status_code == 201 and replay.get_json() == first.get_json()
    for n in range(1, 5):
        age_all(db, 61)
        assert post_create(client, {**EMAIL, "account_id": f"acct_{n}"}, f"k{n}").status_code == 201
    assert row_counts(db) == (5, 5, 5)


def test_limits_come_from_configuration(client, db, monkeypatch):
    monkeypatch.setenv("RATE_LIMIT_PER_HOUR", "2")
    monkeypatch.setenv("RATE_LIMIT_SPACING_SECONDS", "0")
    runtime.reset()
    assert [post_create(client, {**EMAIL, "account_id": f"a{n}"}, f"k{n}").status_code for n in range(3)] == [
        201,
        201,
        429,
    ]


# -- concurrency --------------------------------------------------------------------------------------


def test_two_concurrent_requests_with_one_key_create_once_and_answer_alike(app_client, db):
    barrier = threading.Barrier(2)
    results: list = [None, None]
    clients = [app_client("create_verification") for _ in range(2)]

    def worker(i: int) -> None:
        barrier.wait()
        results[i] = post_create(clients[i], EMAIL, "same-key")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    join(threads)
    assert sorted(r.status_code for r in results) == [201, 201]
    assert results[0].get_json()["verification_id"] == results[1].get_json()["verification_id"]
    assert row_counts(db) == (1, 1, 1)


def test_requests_with_a_key_in_flight_wait_for_it_and_replay_it(app_client, db, database_url):
    """The first request is held mid-transaction; the others block, then replay it (never a 409)."""
    holder = Database.from_url(database_url)
    rt = runtime.get_runtime()
    with holder.transaction():
        first = verifications.create_verification(
            holder, rt.config.create, rt.keyring, CreateVerificationRequest(**EMAIL), "same-key"
        )
        threads, results = in_threads(app_client, [(EMAIL, "same-key")] * 3)
        wait_blocked(db, 3, threads)
        assert all(t.is_alive() for t in threads)  # nobody answered while the first was in flight
    join(threads)
    holder.close()
    assert [r.status_code for r in results] == [201] * 3
    assert all(r.headers["Idempotent-Replayed"] == "true" for r in results)
    assert {r.get_json()["verification_id"] for r in results} == {first.body["verification_id"]}
    assert row_counts(db) == (1, 1, 1)


def test_a_request_whose_first_attempt_died_in_flight_creates_exactly_once(app_client, db, database_url):
    """The first attempt's connection is killed mid-transaction: the waiting retry creates, once."""
    holder = Database.from_url(database_url)
    rt = runtime.get_runtime()
    holder.execute_script("BEGIN")
    verifications.create_verification(
        holder, rt.config.create, rt.keyring, CreateVerificationRequest(**EMAIL), "same-key"
    )
    pid = holder.run("SELECT pg_backend_pid()")[0][0]
    threads, results = in_threads(app_client, [(EMAIL, "same-key")])
    wait_blocked(db, 1, threads)
    db.run("SELECT pg_terminate_backend(:pid)", pid=pid)
    join(threads)
    holder.close()
    assert results[0].status_code == 201 and "Idempotent-Replayed" not in results[0].headers
    assert row_counts(db) == (1, 1, 1)
    assert str(db.one("SELECT id FROM verifications")["id"]) == results[0].get_json()["verification_id"]


def test_concurrent_creates_for_one_account_leave_exactly_one_pending(app_client, db, database_url):
    """Without the per-account lock the second create's snapshot misses the first: two pending."""
    holder = Database.from_url(database_url)
    rt = runtime.get_runtime()
    with holder.transaction():
        first = verifications.create_verification(
            holder, rt.config.create, rt.keyring, CreateVerificationRequest(**EMAIL), "k1"
        )
        threads, results = in_threads(app_client, [({**EMAIL, "destination": "ada@work.example.com"}, "k2")])
        wait_blocked(db, 1, threads)
    join(threads)
    holder.close()
    assert results[0].status_code == 201
    rows = {str(r["id"]): r for r in db.rows("SELECT id, status, superseded_by FROM verifications")}
    second_id = results[0].get_json()["verification_id"]
    assert rows[second_id]["status"] == "pending"
    assert rows[first.body["verification_id"]]["status"] == "superseded"
    assert str(rows[first.body["verification_id"]]["superseded_by"]) == second_id


def test_concurrent_creates_for_one_destination_respect_the_limit(app_client, db):
    threads, results = in_threads(app_client, [({**EMAIL, "account_id": f"a{n}"}, f"k{n}") for n in range(4)])
    join(threads)
    assert sorted(r.status_code for r in results) == [201, 429, 429, 429]
    assert row_counts(db) == (1, 1, 1)


# -- faults -------------------------------------------------------------------------------------------


def test_a_failure_inside_the_transaction_writes_nothing_and_leaks_nothing(client, db):
    """Fault injection: the intent insert fails after the key and verification were written."""
    db.execute_script("""
        CREATE FUNCTION inject_fault() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'injected fault secret-detail'; END $$;
        CREATE TRIGGER inject_fault BEFORE INSERT ON delivery_intents FOR EACH ROW EXECUTE FUNCTION inject_fault();
    """)
    response = post_create(client, EMAIL, "k1")
    assert response.status_code == 500 and response.mimetype == "application/problem+json"
    assert "secret-detail" not in response.get_data(as_text=True)
    assert row_counts(db) == (0, 0, 0)
    db.execute_script("DROP TRIGGER inject_fault ON delivery_intents")
    retried = post_create(client, EMAIL, "k1")
    assert retried.status_code == 201 and "Idempotent-Replayed" not in retried.headers
    assert row_counts(db) == (1, 1, 1)


def test_a_statement_timeout_is_503_and_the_same_key_works_afterwards(client, db, database_url, monkeypatch):
    monkeypatch.setenv("DATABASE_STATEMENT_TIMEOUT_MS", "300")
    runtime.reset()
    blocker = Database.from_url(database_url)
    with blocker.transaction():
        blocker.execute_script("LOCK TABLE verifications IN EXCLUSIVE MODE")
        response = post_create(client, EMAIL, "k1")
    blocker.close()
    assert response.status_code == 503 and int(response.headers["Retry-After"]) > 0
    assert row_counts(db) == (0, 0, 0)
    assert post_create(client, EMAIL, "k1").status_code == 201
    assert row_counts(db) == (1, 1, 1)


def test_expired_key_is_reusable_once_even_when_raced(app_client, db, database_url):
    """An unreaped expired key counts as unused. Two reuses that both read it as expired (held at
    that point by a share lock) must still create once: the second then replays the first."""
    old = post_create(app_client("create_verification"), EMAIL, "k1").get_json()
    db.run(
        "UPDATE idempotency_keys SET created_at = created_at - interval '2 days', expires_at = now() - interval '1 day'"
    )
    age_all(db, 120)
    body = {**EMAIL, "destination": "ada@work.example.com"}
    holder = Database.from_url(database_url)
    with holder.transaction():
        holder.run("SELECT 1 FROM idempotency_keys WHERE key = 'k1' FOR SHARE")
        threads, results = in_threads(app_client, [(body, "k1"), (body, "k1")])
        wait_blocked(db, 2, threads)
    join(threads)
    holder.close()
    assert sorted(r.status_code for r in results) == [201, 201]
    assert sorted(r.headers.get("Idempotent-Replayed", "") for r in results) == ["", "true"]
    fresh = {r.get_json()["verification_id"] for r in results}
    assert len(fresh) == 1 and old["verification_id"] not in fresh
    assert row_counts(db) == (2, 2, 1)
