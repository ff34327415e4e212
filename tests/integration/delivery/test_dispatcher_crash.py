"""Crash points as real process kills: a `verifyctl dispatch` subprocess SIGKILLs itself
(tools/fault_dispatch.py fills the dispatcher's fault hook) after the claim, after begin-attempt, and
after the provider accepted but before settle. Each test asserts the state left behind and that the reconciler's transitions
recover it without losing the intent (and, where the channel allows, without a duplicate)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from signup_verification.outbox import transitions as t
from support.dispatch import attempts, provider_settings, run_dispatch, worker_env
from support.fakes.seed import seed_intents
from support.fakes.smtp import FakeSmtpServer
from support.fakes.twilio import FakeTwilio
from support.paths import ROOT

pytestmark = pytest.mark.slow


@pytest.fixture
def providers():
    with FakeSmtpServer() as smtp, FakeTwilio() as twilio:
        yield smtp, twilio


def dispatch_process(env: dict[str, str], timeout: float = 60, fault: str | None = None) -> subprocess.CompletedProcess:
    command = (
        [sys.executable, "tools/fault_dispatch.py", fault]
        if fault
        else [sys.executable, "-m", "signup_verification.cli", "dispatch", "--json"]
    )
    return subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def states(db) -> Counter:
    return Counter(r[0] for r in db.run("SELECT status FROM delivery_intents"))


def expire_leases(db) -> None:
    db.run("UPDATE delivery_intents SET lease_until = now() - interval '1 second' WHERE lease_until IS NOT NULL")


def test_killed_after_claim_leaves_claims_that_become_eligible_again(db, database_url, providers, tmp_path):
    smtp, twilio = providers
    seed_intents(db, 6, sms_every=3)
    killed = dispatch_process(worker_env(database_url, smtp, twilio, tmp_path), fault="after_claim")
    assert killed.returncode == -signal.SIGKILL
    # The fused claim began the attempts (their rows are written) but no send started (sending_at NULL).
    assert states(db) == {"attempting": 6}
    assert db.run("SELECT outcome, count(*) FROM delivery_attempts GROUP BY outcome") == [["attempting", 6]]
    assert db.run("SELECT count(*) FROM delivery_intents WHERE sending_at IS NOT NULL") == [[0]]
    assert smtp.received == [] and twilio.requests == 0
    owner = db.one("SELECT DISTINCT lease_owner FROM delivery_intents")["lease_owner"]
    assert owner.startswith("crash:")
    # Until the lease expires nobody else may take them; then the reconciler releases (not an attempt:
    # a 'released' outcome, max_attempts + 1), never makes them ambiguous (nothing can have been sent).
    assert t.claim(db, "other", 10, 30) == []
    expire_leases(db)
    assert t.lose_leases(db, provider_settings().retry, 100) == []
    assert len(t.expire_claims(db, 100)) == 6
    assert db.run("SELECT DISTINCT status, attempts, max_attempts FROM delivery_intents") == [["retryable", 1, 6]]
    assert db.run("SELECT DISTINCT outcome, error_class FROM delivery_attempts WHERE outcome <> 'attempting'") == [
        ["released", "lease_expired"]
    ]
    report = run_dispatch(db, provider_settings(smtp, twilio, send_concurrency=8))
    assert report.accepted == 6
    assert sorted(smtp.recipients() + twilio.destinations()) == sorted(
        r[0] for r in db.run("SELECT destination FROM verifications")
    )


def test_killed_after_begin_leaves_attempts_the_reconciler_makes_ambiguous(db, database_url, providers, tmp_path):
    smtp, twilio = providers
    seed_intents(db, 4, sms_every=2)
    killed = dispatch_process(worker_env(database_url, smtp, twilio, tmp_path), fault="after_begin")
    assert killed.returncode == -signal.SIGKILL
    assert states(db) == {"attempting": 4}
    assert [a[1] for a in attempts(db, 1)] == ["attempting"]
    assert smtp.received == [] and twilio.requests == 0  # killed before any network call
    expire_leases(db)
    assert len(t.lose_leases(db, provider_settings().retry, 100)) == 4
    assert states(db) == {"ambiguous": 4}  # we cannot know it was not sent: counts as an attempt
    assert [a[1:] for a in attempts(db, 1)] == [("attempting", None), ("ambiguous", "lease_lost")]
    db.run("UPDATE delivery_intents SET next_attempt_at = now()")
    settings = provider_settings(smtp, twilio)
    resolved = t.resolve_ambiguous(db, settings.retry, 100)
    assert sorted(r[1:] for r in resolved) == [("email", "retryable")] * 2  # sms: held for the operator
    assert run_dispatch(db, settings).accepted == 2
    assert states(db) == {"accepted": 2, "ambiguous": 2} and len(smtp.received) == 2


def test_killed_after_the_provider_accepted_before_settle(db, database_url, providers, tmp_path):
    smtp, twilio = providers
    seed_intents(db, 4, sms_every=2)
    killed = dispatch_process(worker_env(database_url, smtp, twilio, tmp_path), fault="after_send")
    assert killed.returncode == -signal.SIGKILL
    assert states(db) == {"attempting": 4}  # sent, but we never recorded it
    assert len(smtp.received) == 2 and len(twilio.deliveries) == 2
    expire_leases(db)
    t.lose_leases(db, provider_settings().retry, 100)
    db.run("UPDATE delivery_intents SET next_attempt_at = now()")
    settings = provider_settings(smtp, twilio)
    t.resolve_ambiguous(db, settings.retry, 100)
    run_dispatch(db, settings)
    # Email (policy retry) is sent again with the same Message-ID, so clients collapse the duplicate;
    # SMS (policy hold) is not resent: a duplicate code would reach the phone.
    assert len(smtp.received) == 4 and len(twilio.deliveries) == 2
    by_recipient = {}
    for message in smtp.received:
        by_recipient.setdefault(message.rcpt_tos[0], set()).add(message.message["Message-ID"])
    assert all(len(ids) == 1 for ids in by_recipient.values()) and len(by_recipient) == 2
    assert states(db) == {"accepted": 2, "ambiguous": 2}


def test_a_clean_run_prints_its_report(db, database_url, providers, tmp_path):
    smtp, twilio = providers
    seed_intents(db, 3, sms_every=3)
    done = dispatch_process(worker_env(database_url, smtp, twilio, tmp_path))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert (report["claimed"], report["accepted"]) == (3, 3)


def test_sigterm_mid_run_finishes_in_flight_sends_and_leaves_nothing_leased(db, database_url, providers, tmp_path):
    smtp, twilio = providers
    twilio.default_delay = 0.8
    seed_intents(db, 40, sms_every=1)
    env = worker_env(database_url, smtp, twilio, tmp_path, SEND_CONCURRENCY="4", DISPATCH_BATCH_SECONDS="20")
    worker = subprocess.Popen(
        [sys.executable, "-m", "signup_verification.cli", "dispatch", "--json"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while twilio.requests < 4 and time.monotonic() < deadline:  # the first sends are in flight
        time.sleep(0.02)
    worker.send_signal(signal.SIGTERM)
    out, err = worker.communicate(timeout=20)
    assert worker.returncode == 0, err
    report = json.loads(out.strip().splitlines()[-1])
    assert report["accepted"] == twilio.requests == len(twilio.deliveries)  # in-flight sends finished
    assert (
        report["accepted"] >= 4 and report["accepted"] + report["retryable"] + report["released"] == report["claimed"]
    )
    assert db.run("SELECT count(*) FROM delivery_intents WHERE status IN ('claimed', 'attempting')") == [[0]]
    unsent = db.run(
        "SELECT count(*) FROM delivery_intents WHERE status IN ('ready', 'retryable') AND next_attempt_at <= now()"
    )
    assert unsent == [[40 - report["accepted"]]]  # everything not sent is eligible again at once
