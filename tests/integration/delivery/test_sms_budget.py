"""The global SMS budget (SMS_MAX_PER_HOUR): past it SMS sends pause without
failing or charging any intent, email keeps flowing, the signals alert, and an operator's
`verifyctl sms resume` (or the next hour) lets the rest go."""

from __future__ import annotations

import re
import uuid

from signup_verification import cli
from signup_verification.delivery.sending import NOT_ATTEMPTED
from signup_verification.operations import signals
from signup_verification.operations.config import SignalsConfig
from signup_verification.platform.catalogue import catalogue
from support.dispatch import provider_settings, run_dispatch
from support.factories import created
from support.fakes.seed import seed_intents

DEFINITION = catalogue("outbox", "functions")["sms_budget_left"]


def create(db, settings, channel: str, n: int) -> list[uuid.UUID]:
    """n signups through the real create path, to u0@example.com, ... or +14155550100, +14165550100, ..."""
    return [
        created(
            db,
            f"u{i}@example.com" if channel == "email" else f"+1{415 + i}5550100",
            account=f"acct-{channel}-{i}",
            key=f"k-{channel}-{i}",
            config=settings.create,
        )
        for i in range(n)
    ]


def statuses(db, channel: str) -> list[tuple[str, int]]:
    return [
        tuple(r)
        for r in db.run("SELECT status, attempts FROM delivery_intents WHERE channel = :c ORDER BY id", c=channel)
    ]


def test_past_the_budget_sms_pauses_unfailed_email_flows_and_resume_lets_the_rest_go(
    db, smtp, twilio, capsys, service_env, monkeypatch
):
    settings = provider_settings(smtp, twilio, sms_max_per_hour=2)
    create(db, settings, "sms", 5)
    create(db, settings, "email", 2)
    report = run_dispatch(db, settings)
    assert report.accepted == 4 and len(twilio.deliveries) == 2 and len(smtp.received) == 2
    # The three over the budget: still eligible, no attempt charged, nothing failed.
    assert statuses(db, "sms") == [("accepted", 1)] * 2 + [("ready", 0)] * 3
    assert db.run("SELECT count(*) FROM eligible_delivery_intents WHERE channel = 'sms'")[0][0] == 3
    assert (
        db.run(
            "SELECT count(*) FROM delivery_attempts a JOIN delivery_intents i ON i.id = a.intent_id"
            " WHERE i.status = 'ready'"
        )[0][0]
        == 0
    )
    paused = signals.compute(db, "test", settings.signals)
    assert paused.sms_paused and any(a.startswith("sms: budget of 2 per hour spent") for a in paused.alerts())
    assert paused.as_json()["sms_budget"]["paused"] is True
    assert run_dispatch(db, settings).claimed == 0  # a second invocation still takes none

    # verifyctl status --check exits EXIT_ALERT (3) with the alert; verifyctl sms resume grants another budget.
    monkeypatch.setenv("DATABASE_URL", service_env["DATABASE_URL"])
    monkeypatch.setenv("SMS_MAX_PER_HOUR", "2")
    monkeypatch.setenv("DEPLOYMENT", "test")
    assert cli.main(["status", "--check"]) == cli.EXIT_ALERT
    assert cli.main(["sms", "resume"]) == 0
    assert "SMS resumed: 2 sends left this hour" in capsys.readouterr().out
    assert run_dispatch(db, settings).accepted == 2
    assert statuses(db, "sms") == [("accepted", 1)] * 4 + [("ready", 0)]


def test_the_budget_renews_at_the_next_hour(db, smtp, twilio):
    settings = provider_settings(smtp, twilio, sms_max_per_hour=1)
    create(db, settings, "sms", 2)
    assert run_dispatch(db, settings).accepted == 1
    assert signals.compute(db, "test", settings.signals).sms_paused
    with db.transaction() as tx:  # the hour has passed (the attempt log is append-only: lift that here only)
        tx.run("ALTER TABLE delivery_attempts DISABLE TRIGGER USER")
        tx.run("UPDATE delivery_attempts SET observed_at = observed_at - interval '1 hour'")
        tx.run("ALTER TABLE delivery_attempts ENABLE TRIGGER USER")
    assert not signals.compute(db, "test", settings.signals).sms_paused
    assert run_dispatch(db, settings).accepted == 1


def test_without_a_budget_nothing_pauses(db):
    assert signals.compute(db, "test", SignalsConfig(sms_max_per_hour=None)).sms_budget_left is None


def _append_attempt(db, intent_id: int, outcome: str, error_class: str | None = None) -> None:
    db.run(
        "INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version, outcome,"
        " error_class) SELECT id || ':1', id, 1, channel, template_version, :outcome, :error_class"
        " FROM delivery_intents WHERE id = :id",
        id=intent_id,
        outcome=outcome,
        error_class=error_class,
    )


def test_attempts_that_never_reached_the_provider_give_their_place_back(db):
    """The budget counts messages: begun attempts, less those that ended unsent (released claims
    and the error classes the sender marks as never handed to the provider)."""
    listed = re.search(r"error_class IN \(([^)]*)\)", DEFINITION)
    assert listed is not None and set(re.findall(r"'(\w+)'", listed.group(1))) == set(NOT_ATTEMPTED)
    ids = seed_intents(db, 3, sms_every=1)
    for intent_id in ids:
        _append_attempt(db, intent_id, "attempting")
    assert db.one("SELECT sms_budget_left(10) AS left")["left"] == 7
    _append_attempt(db, ids[0], "released")
    _append_attempt(db, ids[1], "retryable", "rate_limited")
    _append_attempt(db, ids[2], "retryable", "timeout")  # may have been sent: still spent
    assert db.one("SELECT sms_budget_left(10) AS left")["left"] == 9
