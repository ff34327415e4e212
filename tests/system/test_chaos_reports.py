"""The chaos run's provider-report invariants (tools/chaos_reports.py) hold for duplicated,
reordered and late reports about real accepted deliveries, and catch each violation they are meant to."""

from __future__ import annotations

import sys
from types import SimpleNamespace

from support.paths import ROOT
from support.reports import accepted, phone_step

sys.path.insert(0, str(ROOT / "tools"))

from chaos_checks import Findings  # noqa: E402
from chaos_reports import Reports  # noqa: E402


def _reported(db, seed: int = 5, **shares) -> Reports:
    """Accepted emails and SMS, then every report the chaos reporter makes about them, held ones included."""
    accepted(db, 25, "email", prefix="rem")
    accepted(db, 5, "sms", prefix="rsm")
    reporter = Reports(SimpleNamespace(config=SimpleNamespace(seed=seed)))
    for name, value in shares.items():
        setattr(reporter, name, value)
    reporter.finish(db)
    return reporter


def _found(db, reporter: Reports) -> Findings:
    found = Findings()
    reporter.check(db, found)
    return found


def test_duplicated_reordered_and_late_reports_keep_every_invariant(db):
    reporter = _reported(db, bounce_share=0.2, failed_share=0.2, duplicate_share=0.5, late_share=0.5,
                         async_bounce_share=0.2)  # fmt: skip
    found = _found(db, reporter)
    assert found.ok, dict(found.violations)
    figures = found.figures
    assert figures["reports_duplicated"] > 0 and figures["reports_late"] > 0 and figures["reports_reordered"] > 0
    assert figures["reports_duplicates_answered"] >= figures["reports_duplicated"]
    assert figures["reports_delivered_intents"] > 0 and figures["reports_undeliverable_intents"] > 0
    assert figures["reports_unknown"] == 0
    assert db.one("SELECT count(*) AS n FROM destination_suppressions")["n"] > 0


def test_whatsapp_and_call_reports_keep_every_invariant(db):
    """Calls busy, not answered, failed, answered by a machine or a person, and WhatsApp messages read or
    failing, their callbacks duplicated, reordered (completed before detection's result) and late."""
    for n in range(12):
        phone_step(db, "voice" if n % 2 else "whatsapp", key=f"chaos-phone-{n}", phone=f"+1415555{n:04d}")
    reporter = Reports(SimpleNamespace(config=SimpleNamespace(seed=11)))
    for name, value in dict(busy_share=0.2, no_answer_share=0.2, machine_share=0.3, no_whatsapp_share=0.3,
                            duplicate_share=0.5, late_share=0.5, reorder_share=0.5).items():  # fmt: skip
        setattr(reporter, name, value)
    reporter.finish(db)
    found = _found(db, reporter)
    assert found.ok, dict(found.violations)
    figures = found.figures
    assert figures["reports_delivered_intents"] > 0 and figures["reports_undeliverable_intents"] > 0
    assert figures["reports_unknown"] == 0 and figures["reports_duplicates_answered"] > 0
    calls = {k: v for k, v in figures.items() if k.startswith("reports_calls_")}
    assert len(calls) >= 3, calls  # several call outcomes were reported
    failed = db.run("SELECT count(*) FROM delivery_intents WHERE role = 'primary' AND status = 'failed'")[0][0]
    forward = db.run("SELECT count(*) FROM delivery_intents WHERE role = 'fallback' AND brought_forward_at IS NOT NULL")
    assert failed > 0 and forward[0][0] == failed  # every step failed for good brought its next one forward


def test_each_report_check_catches_its_violation(db):
    reporter = _reported(db, bounce_share=0.0, failed_share=0.0, async_bounce_share=0.0, undelivered_share=0.0,
                         late_share=0.0)  # fmt: skip
    assert _found(db, reporter).ok
    unreported = accepted(db, 3, "email", prefix="bad")  # accepted, never reported about
    db.run("UPDATE delivery_intents SET delivered_at = now() WHERE id = :i", i=unreported[0]["intent_id"])
    db.run(
        "UPDATE delivery_intents SET status = 'failed', undeliverable_reason = 'bounce' WHERE id = :i",
        i=unreported[1]["intent_id"],
    )
    delivered = db.one("SELECT id FROM delivery_intents WHERE delivered_at IS NOT NULL ORDER BY id LIMIT 1")["id"]
    db.run("UPDATE delivery_intents SET status = 'failed', undeliverable_reason = 'bounce' WHERE id = :i", i=delivered)
    db.run(
        "INSERT INTO delivery_observations (provider, dedup_key, intent_id, attempt_id, event)"
        " VALUES ('sendgrid', 'planted', :i, :a, 'deferred')",
        i=unreported[2]["intent_id"],
        a=unreported[2]["attempt_id"],
    )
    db.run(
        "INSERT INTO destination_suppressions (channel, destination_key, reason, intent_id)"
        " VALUES ('email', decode(repeat('ab', 32), 'hex'), 'planted', :i)",
        i=unreported[2]["intent_id"],
    )
    reporter.acknowledged[("twilio", "SM" + "0" * 32 + ":delivered")] = 0  # answered 200, never stored
    found = _found(db, reporter)
    assert set(found.violations) == {"reports_explained", "reports_duplicate", "reports_lost", "reports_suppression"}
    explained = " | ".join(found.violations["reports_explained"])
    assert "delivered_at without a delivered observation" in explained
    assert "undeliverable without a permanent observation" in explained
    assert "both delivered and undeliverable" in explained


def _checked_attempts(db, only: set[int] | None = None) -> Findings:
    from chaos_checks import _no_stale_lease_write, state_explained_by_attempts

    rows = db.rows("SELECT id, status, attempts, ambiguous_count, undeliverable_reason FROM delivery_intents")
    intents = {r["id"]: r for r in rows if only is None or r["id"] in only}
    attempts: dict[int, list[dict]] = {i: [] for i in intents}
    for row in db.rows("SELECT * FROM delivery_attempts ORDER BY id"):
        if row["intent_id"] in attempts:
            attempts[row["intent_id"]].append(row)
    found = Findings()
    state_explained_by_attempts(found, intents, attempts)
    _no_stale_lease_write(found, attempts)
    return found


def test_an_ambiguous_sms_resolved_by_the_lookup_is_explained_and_a_stray_outcome_is_not(db):
    """The reconciler's lookup writes the ambiguous attempt's outcome after its ambiguous row:
    the attempt-row invariants accept that resolution, and only that one."""
    from signup_verification.outbox import transitions as t
    from signup_verification.outbox.transitions import Settlement
    from support.factories import make_verifications

    make_verifications(db, 2, "sms", prefix="amb")
    claimed = t.claim(db, "worker", 2, 30)
    begun = t.begin_attempts(db, "worker", [c.fence for c in claimed])
    t.settle(
        db, "worker", [Settlement(c.id, c.lease_version, "ambiguous", error_class="server_error") for c in claimed]
    )
    first, second = sorted(begun, key=lambda b: b.intent_id)
    t.resolve_by_lookup(db, [(first.intent_id, first.attempt_id, "SM" + "a" * 32)])
    resolved = _checked_attempts(db)  # the second is ambiguous on a hold channel: explained too
    assert resolved.ok, dict(resolved.violations)
    # the other one "accepted" by something that is not a resolution: not explained
    db.run(
        "INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version, outcome,"
        " error_class, attempted_at) SELECT attempt_id, intent_id, attempt_number, channel, template_version,"
        " 'accepted', 'unexplained', attempted_at FROM delivery_attempts WHERE attempt_id = :a AND outcome = 'attempting'",
        a=second.attempt_id,
    )
    db.run("UPDATE delivery_intents SET status = 'accepted', completed_at = now() WHERE id = :i", i=second.intent_id)
    found = _checked_attempts(db)
    assert [m for m in found.violations["explained"] if f"intent {second.intent_id} " in m]
    assert not [m for m in found.violations["explained"] if f"intent {first.intent_id} " in m]


def test_early_final_reports_are_applied_by_the_settle_and_the_check_catches_one_left_unapplied(db):
    """Final reports about emails and SMS in flight, linked by the attempt they name, then the settle:
    each one failed for good; one put back unapplied is found."""
    from signup_verification.outbox import transitions as t
    from signup_verification.outbox.transitions import Settlement
    from support.factories import make_verifications

    for channel in ("email", "sms"):
        make_verifications(db, 2, channel, prefix=f"fly{channel}")
    claimed = t.claim(db, "worker", 10, 30)
    t.begin_attempts(db, "worker", [c.fence for c in claimed])
    reporter = Reports(SimpleNamespace(config=SimpleNamespace(seed=3)))
    reporter.early_share = 1.0
    reporter._report_early(db)
    assert reporter.figures["reports_early"] == len(claimed) == 4
    settled = t.settle(db, "worker", [Settlement(c.id, c.lease_version, "accepted", provider_ref=f"SM{c.id:032x}")
                                      for c in claimed])  # fmt: skip
    assert set(settled.values()) == {"undeliverable"}
    found = _found(db, reporter)
    assert found.ok, dict(found.violations)
    assert found.figures["reports_early_applied"] == 4
    db.run("UPDATE delivery_intents SET status = 'accepted', undeliverable_reason = NULL, failed_at = NULL,"
           " failure_category = NULL, failure_code = NULL, failure_provider = NULL, failure_fault = NULL"
           " WHERE id = :i", i=claimed[0].id)  # fmt: skip
    assert "reports_early" in _found(db, reporter).violations


def test_early_reports_of_ambiguous_sends_settle_them_and_the_check_catches_a_send_after_the_proof(db):
    """Final reports about SMS whose send ended ambiguous (one of them retryable once its hold passed)
    settle them at once: failed for good, nothing left to send again. An attempt planted after the
    proof is found."""
    from signup_verification.outbox import transitions as t
    from signup_verification.outbox.config import ChannelPolicy, RetryPolicy
    from signup_verification.outbox.transitions import Settlement
    from support.factories import make_verifications

    make_verifications(db, 3, "sms", prefix="ambrep")
    claimed = t.claim(db, "worker", 10, 30)
    t.begin_attempts(db, "worker", [c.fence for c in claimed])
    t.settle(db, "worker", [Settlement(c.id, c.lease_version, "ambiguous", error_class="timeout_after_send")
                            for c in claimed])  # fmt: skip
    assert [r[2] for r in t.resolve_ambiguous(db, RetryPolicy(channels={"sms": ChannelPolicy("retry", 0)}), 1)] == [
        "retryable"
    ]
    reporter = Reports(SimpleNamespace(config=SimpleNamespace(seed=3)))
    reporter.early_share = 1.0
    reporter._report_early(db)
    assert reporter.figures["reports_early"] == 3
    statuses = db.run("SELECT status, undeliverable_reason IS NOT NULL FROM delivery_intents WHERE role <> 'event'")
    assert statuses == [["failed", True]] * 3
    assert t.claim(db, "worker", 10, 30) == []  # nothing is sent again
    found = _found(db, reporter)
    assert found.ok, dict(found.violations)
    assert found.figures["reports_early_applied"] == 3
    assert _checked_attempts(db).ok
    # a second message sent well after the proof (as a retry that ignored the report would)
    db.run("SET session_replication_role = replica")  # the logs are append-only: their triggers set aside
    try:
        db.run("UPDATE delivery_observations SET received_at = received_at - interval '1 minute'")
        db.run("INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version,"
               " outcome) VALUES (:a, :i, 2, 'sms', 'signup/v1', 'attempting')", a=f"{claimed[0].id}:2", i=claimed[0].id)  # fmt: skip
    finally:
        db.run("RESET session_replication_role")
    caught = _found(db, reporter).violations["reports_early"]
    assert any(f"attempt {claimed[0].id}:2 began after a final report" in m for m in caught), caught


def test_settlements_by_early_reports_name_their_messages_and_the_check_catches_an_unnamed_one(db):
    """Final reports about SMS in flight, then their sends end ambiguous: each settlement by a report
    names the message the report did (the send never learned its sid). One that names none is found."""
    from signup_verification.outbox import transitions as t
    from signup_verification.outbox.transitions import Settlement
    from support.factories import make_verifications

    make_verifications(db, 2, "sms", prefix="named")
    claimed = t.claim(db, "worker", 10, 30)
    t.begin_attempts(db, "worker", [c.fence for c in claimed])
    reporter = Reports(SimpleNamespace(config=SimpleNamespace(seed=3)))
    reporter.early_share = 1.0
    reporter._report_early(db)
    settled = t.settle(db, "worker", [Settlement(c.id, c.lease_version, "ambiguous", error_class="timeout_after_send")
                                      for c in claimed])  # fmt: skip
    assert set(settled.values()) == {"undeliverable"}
    found = _found(db, reporter)
    assert found.ok, dict(found.violations)
    assert found.figures["reports_settlements"] == 2
    db.run("SET session_replication_role = replica")  # the log is append-only: its triggers set aside
    try:
        db.run("UPDATE delivery_attempts SET provider_ref = NULL WHERE intent_id = :i AND error_class = 'provider_report'",
               i=claimed[0].id)  # fmt: skip
    finally:
        db.run("RESET session_replication_role")
    assert _found(db, reporter).violations["reports_explained"] == [
        f"attempt {claimed[0].id}:1 settled by a report, naming None instead of the message or call its reports named"
    ]


def test_evidence_settling_an_earlier_attempt_is_explained_only_while_later_ones_were_never_sent(db):
    """A report of an ambiguous attempt that comes once the next attempt was claimed settles the step
    and ends the claimed attempt unsent: explained. An earlier attempt settled after a later one was
    handed to a provider is not."""
    from signup_verification.outbox import transitions as t
    from signup_verification.outbox.transitions import Settlement
    from support.reports import claimed_again, report_first_attempt

    settled, _ = claimed_again(db)
    report_first_attempt(db, settled.id, "bounce")
    found = _checked_attempts(db, {settled.id})  # (its next step, brought forward, is not sent yet)
    assert found.ok, dict(found.violations)
    sent, _ = claimed_again(db)
    t.start(db, "w2", [sent.fence])
    t.settle(db, "w2", [Settlement(sent.id, sent.lease_version, "accepted", provider_ref="m2")])
    db.run(  # attempt 1 "settled" by evidence after attempt 2 was sent and accepted
        "INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version, outcome,"
        " error_class, attempted_at) SELECT attempt_id, intent_id, attempt_number, channel, template_version,"
        " 'accepted', 'provider_report', attempted_at FROM delivery_attempts"
        " WHERE intent_id = :i AND attempt_number = 1 AND outcome = 'attempting'",
        i=sent.id,
    )
    found = _checked_attempts(db, {settled.id, sent.id})
    assert found.violations["explained"] == [
        f"intent {sent.id} (accepted): attempt 1 was settled by the provider's evidence after a later attempt was sent"
    ]
