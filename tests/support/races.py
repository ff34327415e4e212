"""Two transactions racing on one row's lock, made deterministic: the first holds its transaction
open until the second is seen waiting for the lock."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from signup_verification.platform.database import Database


def held_while(database_url: str, first: Callable[[Database], None], second: Callable[[], None]) -> None:
    """`first` in a transaction of its own, held open while `second` runs in a thread until it waits for
    a row lock (polled, at most 10 s); then the transaction commits and `second` finishes."""
    other, watcher = Database.from_url(database_url), Database.from_url(database_url)
    try:
        with other.transaction() as held:
            first(held)
            thread = threading.Thread(target=second)
            thread.start()
            for _ in range(1000):
                if watcher.one("SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock'")["n"]:
                    break
                time.sleep(0.01)
            else:
                raise AssertionError("no session waited for the lock")
        thread.join(10)
    finally:
        other.close()
        watcher.close()
