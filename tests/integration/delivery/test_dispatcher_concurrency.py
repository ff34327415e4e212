"""Four worker processes race over 2,000 intents against local providers that record every
delivery: each intent is delivered exactly once, none is lost, no worker writes over another."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest

from support.dispatch import worker_env
from support.fakes.seed import seed_intents
from support.fakes.smtp import FakeSmtpServer
from support.fakes.twilio import FakeTwilio
from support.paths import ROOT

pytestmark = pytest.mark.slow
WORKERS, INTENTS = 4, 2000


def test_four_workers_deliver_each_intent_exactly_once(db, database_url, tmp_path):
    seed_intents(db, INTENTS, sms_every=5)
    with FakeSmtpServer() as smtp, FakeTwilio() as twilio:
        env = worker_env(database_url, smtp, twilio, tmp_path, SEND_CONCURRENCY="4", DISPATCH_MAX_BATCH="100")
        workers = [
            subprocess.Popen(
                [sys.executable, "-m", "signup_verification.cli", "dispatch", "--json"],
                env=env,
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(WORKERS)
        ]
        outputs = [w.communicate(timeout=120) for w in workers]
        assert [w.returncode for w in workers] == [0] * WORKERS, [o[1][-2000:] for o in outputs]
        delivered = smtp.recipients() + twilio.destinations()
    reports = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
    expected = sorted(r[0] for r in db.run("SELECT destination FROM verifications"))
    counts = Counter(delivered)
    assert sorted(counts) == expected  # none lost
    assert max(counts.values()) == 1  # none twice
    assert sum(r["claimed"] for r in reports) == INTENTS == sum(r["accepted"] for r in reports)
    assert sum(r["stale_writes"] for r in reports) == 0
    assert sum(1 for r in reports if r["claimed"]) >= 2  # the work really was shared
    assert db.run("SELECT status, count(*) FROM delivery_intents GROUP BY status") == [["accepted", INTENTS]]
    assert db.run("SELECT count(*), count(DISTINCT attempt_id) FROM delivery_attempts") == [[2 * INTENTS, INTENTS]]
    owners = db.run("SELECT count(DISTINCT lease_owner) FROM delivery_attempts")
    assert owners == [[sum(1 for r in reports if r["claimed"])]]
