"""Fan-out end to end in the local emulation: the dispatch target under functions-framework's real
server, started once as Cloud Scheduler does, with a backlog larger than one invocation can send
within its budget; the fan-out's local stand-in (platform/tasks.py) POSTs more invocations to that
same target, and together they drain it: every message sent once, no invocation past its budget."""

from __future__ import annotations

import os
import time
import urllib.request

import pytest

from signup_verification.platform.database import Database
from support.fakes.http import FakeSendGrid
from support.fakes.seed import seed_intents
from support.gunicorn_served import free_port, functions_framework
from support.paths import TEST_TOKEN_KEYS

INTENTS = 900
TIMEOUT, MARGIN = 12, 2  # the budget: 10 s
SENDERS = 8  # 8 in flight at 200 ms: ~32 sends/s, ~320 in one invocation's budget


def post(url: str) -> None:
    request = urllib.request.Request(url, data=b"{}", method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:  # loopback  # nosec B310
        assert answer.status == 200


def wait_until(check, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.5)
    return check()


@pytest.mark.slow
def test_a_backlog_beyond_one_invocations_budget_is_drained_by_parallel_invocations(database_url, tmp_path):
    db = Database.from_url(database_url)
    seed_intents(db, INTENTS)
    port = free_port()
    with FakeSendGrid() as sendgrid:
        sendgrid.default_delay = 0.2
        env = {
            "DATABASE_URL": database_url,
            "TOKEN_KEYS": TEST_TOKEN_KEYS,
            "VERIFY_LOCAL_DIR": str(tmp_path / "local"),
            "DEPLOYMENT": "test",
            "EMAIL_TRANSPORT": "sendgrid",
            "SENDGRID_API_KEY": sendgrid.api_key,
            "SENDGRID_API_URL": sendgrid.send_url,
            "EMAIL_FROM": "Signup <no-reply@example.org>",
            "SEND_CONCURRENCY_MAX_EMAIL": str(SENDERS),
            "FUNCTION_TIMEOUT_SECONDS": str(TIMEOUT),
            "DISPATCH_SAFETY_MARGIN_SECONDS": str(MARGIN),
            "DISPATCH_FANOUT_URL": f"http://127.0.0.1:{port}/",  # the stand-in starts them on this same target
            "DISPATCH_MAX_PARALLEL": "3",
            "DISPATCH_FANOUT_DRAIN_SECONDS": "5",
            "THREADS": "8",  # concurrent requests, as Cloud Run would run them on instances of their own
            "LOG_LEVEL": "INFO",
            **{k: "" for k in os.environ if k.startswith("DISPATCH_IDLE")},
        }
        with functions_framework(["dispatch"], env, tmp_path, ports={"dispatch": port}) as served:
            started = time.monotonic()
            post(served.urls["dispatch"])  # the scheduler's tick
            drained = wait_until(
                lambda: (
                    db.run(
                        "SELECT count(*) FILTER (WHERE status <> 'accepted'), (SELECT count(*) FROM dispatch_invocations)"
                        " FROM delivery_intents"
                    )[0]
                    == [0, 0]
                ),
                timeout=4 * TIMEOUT,
            )
            elapsed = time.monotonic() - started
            log = served.output("dispatch")
        taken = sendgrid.destinations()
    assert drained, db.run("SELECT status, count(*) FROM delivery_intents GROUP BY 1")
    assert len(taken) == INTENTS and len(set(taken)) == INTENTS  # every message once: no duplicate
    assert "dispatch_fanout" in log or "fan-out:" in log
    invocations = db.rows(
        "SELECT lease_owner, min(claimed_at) AS first, max(observed_at) AS last FROM delivery_attempts"
        " GROUP BY lease_owner ORDER BY 2"
    )
    assert len(invocations) >= 3, invocations  # the scheduled one and at least two it started
    parent, *siblings = invocations
    assert any(s["first"] < parent["last"] for s in siblings)  # they ran while it did: in parallel
    budget = TIMEOUT - MARGIN
    for invocation in invocations:
        assert (invocation["last"] - invocation["first"]).total_seconds() <= budget, invocation  # no overrun
    assert elapsed < INTENTS / (SENDERS / 0.25) + 2 * TIMEOUT  # faster than one invocation after another
    db.close()
