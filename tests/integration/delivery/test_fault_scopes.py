"""What a fault may hold, tried as an attacker would: signups to destinations an outsider chooses,
whose providers answer as Twilio and an SMTP relay do (a refusal for that destination, a carrier
filtering report, a relay quoting the outsider's own server), beside genuine users. No genuine
user's message waits because of it: a route fault fails its own message, holds at most its route
(one destination country, one receiving domain) and only when several destinations and accounts
fail and make up a share of the route's sends. An account fault (bad credentials) still holds the
whole channel after a handful of attempts. Real PostgreSQL, the providers' protocols."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from signup_verification.delivery import reports
from signup_verification.operations import channel_holds, signal_records, signals
from support.dispatch import intent, provider_settings, run_dispatch
from support.factories import created
from support.factories import intent as primary_intent
from support.fakes.smtp import SmtpBehaviour
from support.fakes.twilio import FakeTwilio
from support.reports import twilio_form

SETTINGS = dict(rate_limit_prefix_per_hour=1000, rate_limit_account_per_hour=1000)
FR_21606 = FakeTwilio.error(
    400,
    21606,
    "The 'From' phone number provided is not a valid message-capable Twilio phone number for this destination",
)
ECHO = ("550 5.7.1 <{to}>: Recipient address rejected: undeliverable address: host mx.evil.example[192.0.2.7] "
        "said: 554 5.7.1 <no-reply@example.org>: Sender address rejected: Relay access denied")  # fmt: skip


def create(db, settings, destination: str, account: str | None = None) -> int:
    """A signup through the real create path; its primary intent's id."""
    return primary_intent(db, created(db, destination, account=account, config=settings.create))["id"]


def holds(db) -> dict[tuple[str, str], bool]:
    rows = db.rows("SELECT channel, route, held_until > now() AS held FROM channel_holds")
    return {(r["channel"], r["route"]): bool(r["held"]) for r in rows}


def french(n: int) -> str:
    return f"+3361234{n:04d}"


def test_destination_scoped_refusals_from_chosen_numbers_never_delay_another_user(db, twilio):
    """Twilio 21606 for +33 numbers an attacker signs up: each fails its own message. Nothing else
    stops: the US victim beside them is sent in the same invocation, with no backoff."""
    settings = provider_settings(twilio=twilio, send_concurrency=2, **SETTINGS)
    attackers = [create(db, settings, french(n)) for n in range(3)]
    for n in range(3):
        twilio.by_destination[french(n)] = FR_21606
    victim = create(db, settings, "+14155550142")
    report = run_dispatch(db, settings)
    assert (report.accepted, report.failed, report.retryable) == (1, 3, 0)
    assert intent(db, victim)["status"] == "accepted" and intent(db, victim)["attempts"] == 1
    assert all(intent(db, a)["failure_code"] == "21606" for a in attackers)
    assert ("sms", "") not in holds(db) and not any(holds(db).values())  # three destinations hold nothing
    # and again, every half hour: the channel never holds, the victim's next code goes out at once
    again = create(db, settings, "+14155550143")
    for n in range(3, 6):
        twilio.by_destination[french(n)] = FR_21606
        create(db, settings, french(n))
    run_dispatch(db, settings)
    assert intent(db, again)["status"] == "accepted"


def test_route_faults_from_many_destinations_hold_that_route_only(db, twilio):
    """Past ROUTE_HOLD_MIN_DESTINATIONS distinct destinations and accounts, and most of the route's
    sends: SMS to France waits (not failed, not charged), SMS to the US goes out, and the operator
    sees the hold's scope and lifts it by its scope."""
    settings = provider_settings(twilio=twilio, send_concurrency=2, route_hold_min_destinations=3, **SETTINGS)
    for n in range(4):
        twilio.by_destination[french(n)] = FR_21606
        create(db, settings, french(n))
    run_dispatch(db, settings)
    assert holds(db) == {("sms", "FR"): True}
    status = signals.compute(db, "test")
    assert status.channel("sms").held_routes == ["sms:FR"] and not status.channel("sms").held
    assert any(
        "sms:FR: route held (scope route)" in a and "verifyctl channel resume sms:FR" in a for a in status.alerts()
    )
    # a French genuine user now waits for the hold; a US user is sent at once
    waiting = create(db, settings, french(50))
    us = create(db, settings, "+14155550144")
    report = run_dispatch(db, settings)
    assert intent(db, us)["status"] == "accepted"
    held = intent(db, waiting)
    assert (held["status"], held["attempts"], held["max_attempts"]) == ("retryable", 1, 6)  # not charged
    until = db.one("SELECT held_until FROM channel_holds WHERE route = 'FR'")["held_until"]
    assert abs((held["next_attempt_at"] - until).total_seconds()) < 5  # eligible again when the hold ends
    assert french(50) not in [d.destination for d in twilio.deliveries]
    assert report.accepted == 1
    assert channel_holds.resume(db, "sms:FR", "test") is True
    db.run("UPDATE delivery_intents SET next_attempt_at = now() WHERE id = :i", i=waiting)
    run_dispatch(db, settings)
    assert intent(db, waiting)["status"] == "accepted"


def test_a_few_failing_destinations_among_a_routes_working_sends_hold_nothing(db, twilio):
    """Distinct destinations alone are not enough: they must be a share of the route's recent sends."""
    settings = provider_settings(twilio=twilio, send_concurrency=2, route_hold_min_destinations=3, **SETTINGS)
    for n in range(8):  # genuine French users, sent fine
        create(db, settings, french(100 + n))
    for n in range(3):
        twilio.by_destination[french(n)] = FR_21606
        create(db, settings, french(n))
    run_dispatch(db, settings)
    assert holds(db) == {("sms", "FR"): False}  # a run, counted; no hold (3 of 11)


def test_faults_from_one_destination_or_one_account_hold_nothing(db, twilio):
    settings = provider_settings(twilio=twilio, send_concurrency=2, route_hold_min_destinations=3,
                                 rate_limit_per_hour=1000, rate_limit_spacing_seconds=0, **SETTINGS)  # fmt: skip
    twilio.by_destination[french(1)] = FR_21606
    for _ in range(5):  # one destination, again and again
        create(db, settings, french(1))
        run_dispatch(db, settings)
    for n in range(2, 7):  # many destinations, one account
        twilio.by_destination[french(n)] = FR_21606
        create(db, settings, french(n), account="acct-one")
    run_dispatch(db, settings)
    assert not any(holds(db).values())


def test_carrier_filtering_reports_from_chosen_numbers_never_delay_another_user(db, twilio):
    """30007 status callbacks about the attacker's numbers: route faults of France. Below the
    thresholds they hold nothing; past them, France only. The US victim is always sent at once."""
    settings = provider_settings(twilio=twilio, send_concurrency=2, route_hold_min_destinations=3, **SETTINGS)
    attackers = [create(db, settings, french(n)) for n in range(4)]
    run_dispatch(db, settings)
    refs = {i: intent(db, i)["provider_ref"] for i in attackers}
    first = [reports.twilio_observation(twilio_form(refs[i], "undelivered", ErrorCode="30007")) for i in attackers[:2]]
    result = reports.ingest(db, "twilio", first, settings.dispatch.failures)
    assert (result.route_faults, result.routes_held, result.sender_faults, result.held) == (2, 0, 0, 0)
    victim = create(db, settings, "+14155550145")
    assert run_dispatch(db, settings).accepted == 1 and intent(db, victim)["status"] == "accepted"
    rest = [reports.twilio_observation(twilio_form(refs[i], "undelivered", ErrorCode="30007")) for i in attackers[2:]]
    assert reports.ingest(db, "twilio", rest, settings.dispatch.failures).routes_held == 1
    assert holds(db) == {("sms", "FR"): True}
    later = create(db, settings, "+14155550146")
    assert run_dispatch(db, settings).accepted == 1 and intent(db, later)["status"] == "accepted"
    assert db.run("SELECT count(*) FROM destination_suppressions")[0][0] == 0  # nobody's number blamed


def test_relay_echoes_from_a_chosen_domain_never_delay_another_user(db, smtp):
    """A relay verifying recipients quotes the attacker's server ("Sender address rejected", "Relay
    access denied") in its RCPT answer: a route fault of that domain, never of our account. The
    genuine users beside it are sent in the same invocation; enough of it holds the attacker's own
    domain, and only that."""
    settings = provider_settings(smtp, send_concurrency=2, route_hold_min_destinations=3, **SETTINGS)
    smtp.behaviour = SmtpBehaviour(
        rcpt_reply=lambda address: ECHO.format(to=address) if address.endswith("@evil.example") else None
    )
    attackers = [create(db, settings, f"victim{n}@evil.example") for n in range(3)]
    genuine = [create(db, settings, f"user{n}@example.com") for n in range(3)]
    report = run_dispatch(db, settings)
    assert (report.accepted, report.failed, report.retryable) == (3, 3, 0)
    assert all(intent(db, i)["status"] == "accepted" and intent(db, i)["attempts"] == 1 for i in genuine)
    assert all(intent(db, i)["failure_category"] == "blocked" for i in attackers)
    # an email route is judged once its run has counted the domain's sends a while (a tenth of the window)
    assert holds(db) == {("email", "evil.example"): False}
    db.run("UPDATE channel_holds SET window_started_at = now() - interval '61 seconds'")
    create(db, settings, "victim9@evil.example")
    run_dispatch(db, settings)
    assert holds(db) == {("email", "evil.example"): True}  # the attacker's own domain, nothing else
    later = create(db, settings, "ada@example.com")
    assert run_dispatch(db, settings).accepted == 1 and intent(db, later)["status"] == "accepted"
    assert db.run("SELECT count(*) FROM destination_suppressions")[0][0] == 0


def test_a_burst_of_blocked_reports_cannot_outweigh_a_domains_traffic(db, smtp):
    """SendGrid-style `blocked` reports (a route fault of the domain) about sends made before the run
    started: the domain's sends counted meanwhile decide, not the burst."""
    from signup_verification.delivery.classification import sendgrid as sendgrid_table

    settings = provider_settings(smtp, send_concurrency=2, route_hold_min_destinations=3, **SETTINGS)
    early = [create(db, settings, f"early{n}@example.com") for n in range(4)]
    run_dispatch(db, settings)
    blocked = sendgrid_table.event_verdict("bounce", "5.7.1", bounce_type="blocked")
    burst = [
        reports.Observation.classified(blocked, dedup_key=f"b-{i}", event="blocked", intent_id=i, attempt_id=f"{i}:1")
        for i in early
    ]
    assert reports.ingest(db, "sendgrid", burst[:2], settings.dispatch.failures).route_faults == 2
    for n in range(20):  # the domain's traffic goes on, counted by the open run
        create(db, settings, f"later{n}@example.com")
    run_dispatch(db, settings)
    assert db.one("SELECT attempts FROM channel_holds WHERE route = 'example.com'")["attempts"] == 20
    db.run("UPDATE channel_holds SET window_started_at = now() - interval '61 seconds'")
    assert reports.ingest(db, "sendgrid", burst[2:], settings.dispatch.failures).routes_held == 0  # 4 of 20
    assert holds(db) == {("email", "example.com"): False}


def test_bad_credentials_still_hold_the_channel_after_a_handful_of_attempts(db, twilio):
    """20003 is every message's: each invocation stops the channel at its first refusal, and
    CHANNEL_HOLD_AFTER_FAULTS (3) of them hold SMS until resumed."""
    settings = provider_settings(twilio=twilio, twilio_auth_token="wrong", send_concurrency=1, **SETTINGS)
    sms = [create(db, settings, f"+1415555{n:04d}") for n in range(5)]
    for _ in range(3):
        run_dispatch(db, settings)
        db.run("UPDATE delivery_intents SET next_attempt_at = now() WHERE status = 'retryable'")
    assert twilio.requests == 3  # a handful: one per invocation
    assert holds(db) == {("sms", ""): True}
    assert run_dispatch(db, settings).claimed == 0  # held: nothing more is tried
    assert sum(intent(db, i)["status"] == "retryable" for i in sms) == 2
    status = signals.compute(db, "test")
    assert status.channel("sms").held and any("sms: held (scope account)" in a for a in status.alerts())


def test_a_route_hold_is_shown_by_its_scope_and_lapses_on_its_own(db, twilio):
    settings = provider_settings(twilio=twilio, route_hold_min_destinations=2, **SETTINGS)
    for n in range(2):
        twilio.by_destination[french(n)] = FR_21606
        create(db, settings, french(n))
    run_dispatch(db, settings)
    record = signal_records.record_fields(
        signals.compute(db, "test"), signals.compute(db, "test").channel("sms"), "test"
    )
    assert (record["routes_held"], record["held_routes"], record["channel_held"]) == (1, ["sms:FR"], False)
    db.run("UPDATE channel_holds SET held_until = now() - interval '1 second', "
           "window_started_at = now() - interval '1 hour'")  # fmt: skip
    assert signals.compute(db, "test").channel("sms").held_routes == []
    waiting = create(db, settings, french(60))
    assert run_dispatch(db, settings).accepted == 1 and intent(db, waiting)["status"] == "accepted"
    assert datetime.now(UTC) > db.one("SELECT max(held_until) AS t FROM channel_holds")["t"]


@pytest.mark.parametrize("scope", ["sms:fr", "email:Example.COM"])
def test_resume_reads_a_scope(db, scope):
    parsed = channel_holds.HoldScope.parse(scope)
    assert str(parsed) in ("sms:FR", "email:example.com") and parsed.scope == "route"
    assert channel_holds.resume(db, parsed, "test") is False
    with pytest.raises(ValueError):
        channel_holds.HoldScope.parse("sms:France")
