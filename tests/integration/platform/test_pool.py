"""DATABASE_POOL_SIZE: an instance's request threads share at most that many connections, each request
holding one until it ends (functions/main.py releases it); unset, each thread keeps its own."""

from __future__ import annotations

import threading

from signup_verification import runtime
from signup_verification.config import load


def served_by(instance: runtime.Runtime, requests: int, threads: int) -> list[int]:
    """The backend pid each of `requests` requests ran on, `threads` at a time."""
    pids: list[int] = []
    lock = threading.Lock()

    def request() -> None:
        try:
            [[pid, _]] = instance.db.run("SELECT pg_backend_pid(), pg_sleep(0.02)")
            with lock:
                pids.append(pid)
        finally:
            instance.release_db()

    for start in range(0, requests, threads):
        batch = [threading.Thread(target=request) for _ in range(min(threads, requests - start))]
        for thread in batch:
            thread.start()
        for thread in batch:
            thread.join(30)
    return pids


def test_a_pool_shares_its_connections_among_more_request_threads(database_url, tmp_path):
    pooled = runtime.Runtime(load({"DATABASE_URL": database_url, "DATABASE_POOL_SIZE": "2",
                                   "VERIFY_LOCAL_DIR": str(tmp_path)}))  # fmt: skip
    try:
        pids = served_by(pooled, 24, threads=8)
    finally:
        pooled.close()
    assert len(pids) == 24 and len(set(pids)) == 2


def test_without_a_pool_each_request_thread_keeps_its_own_connection(database_url, tmp_path):
    own = runtime.Runtime(load({"DATABASE_URL": database_url, "VERIFY_LOCAL_DIR": str(tmp_path)}))
    try:
        pids = served_by(own, 8, threads=8)
    finally:
        own.close()
    assert len(set(pids)) == 8


def test_a_connection_given_back_inside_a_transaction_is_closed_not_handed_on(database_url, tmp_path):
    pooled = runtime.Runtime(load({"DATABASE_URL": database_url, "DATABASE_POOL_SIZE": "1",
                                   "VERIFY_LOCAL_DIR": str(tmp_path)}))  # fmt: skip
    try:
        db = pooled.db
        db.execute_script("BEGIN")
        db._in_transaction = True  # a request that ended inside one (it cannot, through Database.transaction)
        [[first]] = db.run("SELECT pg_backend_pid()")
        pooled.release_db()
        [[second]] = pooled.db.run("SELECT pg_backend_pid()")
        pooled.release_db()
    finally:
        pooled.close()
    assert first != second
