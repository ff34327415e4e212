"""docs/runbook.md's controlled tests, automated. Each test records the event sequence it observes and
compares it with the sequence stored in the runbook, so the runbook cannot drift from the system.

  paused-worker   pause the worker, insert eligible intents: the age signal crosses the threshold;
                  resume: it clears.
  lease-expiry    a worker stops after claiming and before completing; after lease expiry one
                  reconcile run makes exactly one new transition per intent under the ambiguity policy.
"""

from __future__ import annotations

import re

from signup_verification.operations import signal_records, signals
from signup_verification.operations.config import SignalsConfig
from signup_verification.outbox import transitions as t
from support.factories import SETTINGS, expire_leases, make_verifications
from support.paths import ROOT

RUNBOOK = ROOT / "docs" / "runbook.md"
QUESTIONS = [
    "Is ready work aging?",
    "Is one channel isolated?",
    "Are claims progressing?",
    "Is reconciliation advancing?",
    "Which attempt states are ambiguous?",
]


def documented_sequence(name: str) -> list[str]:
    text = RUNBOOK.read_text()
    match = re.search(rf"<!-- controlled-test: {re.escape(name)} -->\s*```text\n(.*?)```", text, re.S)
    assert match, f"docs/runbook.md has no expected sequence for {name}"
    return [line.rstrip() for line in match.group(1).splitlines() if line.strip()]


def test_runbook_opens_with_the_five_questions_and_how_to_answer_each():
    text = RUNBOOK.read_text()
    first_section = text.split("\n## ", 2)[1]
    positions = [first_section.find(q) for q in QUESTIONS]
    assert all(p >= 0 for p in positions) and positions == sorted(positions)
    for question in QUESTIONS:
        row = next(line for line in first_section.splitlines() if question in line)
        assert "verifyctl" in row or "SELECT" in row or "jsonPayload" in row, row


def test_runbook_documents_every_field_of_the_signals_record(db, log_lines):
    make_verifications(db, 1)
    signal_records.emit(db, SETTINGS.deployment, source="dispatch", config=SETTINGS.signals)
    record = log_lines.events("signals")[0]
    fields = set(record) - {"message", "severity", "httpRequest"} - {k for k in record if k.startswith("logging.")}
    text = RUNBOOK.read_text()
    missing = [f for f in sorted(fields) if f"`{f}`" not in text]
    assert not missing, f"docs/runbook.md does not document {missing}"


def _age(db, channel: str) -> signals.ChannelSignals:
    return signals.compute(db, "test", SignalsConfig(ready_age_alert_seconds=120)).channel(channel)


def test_paused_worker_ages_the_signal_and_resuming_clears_it(app_client, db):
    observed = []
    # 1. The worker is paused (no dispatch runs); eligible intents arrive.
    make_verifications(db, 3)
    email = _age(db, "email")
    observed.append(
        f"insert 3 eligible email intents: ready_count={email.ready_count} "
        f"alert={'yes' if email.oldest_ready_verification_seconds > 120 else 'no'}"
    )
    # 2. Time passes with nobody claiming: the eligible rows are now 150 s old.
    db.run("UPDATE delivery_intents SET next_attempt_at = next_attempt_at - interval '150 seconds'")
    email = _age(db, "email")
    overdue = app_client("reconcile").post("/").get_json()["overdue"]["email"]["count"]
    status = app_client("status").get("/").get_json()
    observed.append(
        f"150 s later: ready_count={email.ready_count} oldest>120={email.oldest_ready_verification_seconds > 120} "
        f"alert={'yes' if any(a.startswith('email: oldest') for a in status['alerts']) else 'no'} "
        f"reconcile_overdue={overdue}"
    )
    # 3. The worker resumes: one dispatch invocation drains the backlog.
    dispatched = app_client("dispatch").post("/").get_json()
    email = _age(db, "email")
    observed.append(
        f"worker resumes: accepted={dispatched['accepted']} ready_count={email.ready_count} "
        f"oldest={email.oldest_ready_verification_seconds:g} "
        f"alert={'yes' if email.oldest_ready_verification_seconds > 120 else 'no'}"
    )
    assert observed == documented_sequence("paused-worker")
    assert email.last_claim_age_seconds is not None and email.last_claim_age_seconds < 60


def _snapshot(db) -> dict[int, tuple[str, str]]:
    return {r[0]: (r[1], r[2]) for r in db.run("SELECT id, channel, status FROM delivery_intents ORDER BY id")}


def _transitions(before: dict, after: dict) -> list[str]:
    moves: dict[str, list[str]] = {}
    for intent_id, (channel, status) in after.items():
        if before[intent_id][1] != status:
            moves.setdefault(f"{before[intent_id][1]} -> {status}", []).append(channel)
    return [f"{move}: {', '.join(sorted(channels))}" for move, channels in sorted(moves.items())] or ["no transition"]


def test_worker_stopped_after_claim_leads_to_one_transition_per_intent(app_client, db):
    make_verifications(db, 2)
    make_verifications(db, 2, channel="sms")
    claimed = t.claim(db, "stopped-worker", 4, 30)
    by_channel = {c: [i for i in claimed if i.channel == c] for c in ("email", "sms")}
    t.begin_attempts(db, "stopped-worker", [by_channel["email"][0].fence, by_channel["sms"][0].fence])
    # The worker stops here: two intents claimed, two attempting. Its leases then expire.
    expire_leases(db)
    reconcile = app_client("reconcile")
    observed = []
    attempts_before = db.run("SELECT count(*) FROM delivery_attempts")[0][0]
    for label in ("run 1 (leases expired)", "run 2 (immediately after)", "run 3 (ambiguous hold over)"):
        if label.startswith("run 3"):
            db.run(
                "UPDATE delivery_intents SET next_attempt_at = now() - interval '1 second' WHERE status = 'ambiguous'"
            )
        before = _snapshot(db)
        assert reconcile.post("/").status_code == 200
        observed += [f"{label}: {move}" for move in _transitions(before, _snapshot(db))]
        if label.startswith("run 1"):
            rows = db.run(
                "SELECT outcome, error_class FROM delivery_attempts WHERE id > :n ORDER BY id", n=attempts_before
            )
            observed.append(f"{label}: attempt rows added: {', '.join(f'{o}/{e}' for o, e in rows)}")
    sms = signals.compute(db, "test").channel("sms")
    observed.append(f"after run 3: sms ambiguous_count={sms.ambiguous_count}")
    assert observed == documented_sequence("lease-expiry")
