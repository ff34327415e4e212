"""Which provider answers stop a channel, and that a send never handed to the provider never
spends one of the intent's attempts. Real PostgreSQL, Twilio over real HTTP."""

from __future__ import annotations

import logging
import threading

import pytest

from support.dispatch import attempts, intent, provider_settings, run_dispatch
from support.fakes.seed import seed_intents
from support.fakes.twilio import FakeTwilio


@pytest.fixture
def twilio():
    with FakeTwilio() as fake:
        yield fake


def destination(db, intent_id: int) -> str:
    return db.one(
        "SELECT v.destination FROM delivery_intents i JOIN verifications v ON v.id = i.verification_id "
        "WHERE i.id = :id",
        id=intent_id,
    )["destination"]


@pytest.mark.parametrize(
    "code,message",
    [
        (21408, "Permission to send an SMS has not been enabled for the region indicated by the 'To' number"),
        (
            21606,
            "The 'From' phone number provided is not a valid message-capable Twilio phone number for this destination",
        ),
        (21659, "The 'From' number is not a Twilio phone number or Twilio does not support messaging to that country"),
        (21608, "The number is unverified. Trial accounts cannot send messages to unverified numbers"),
        (21612, "The message cannot be sent with the current combination of 'To' and/or 'From' parameters"),
    ],
)
def test_a_route_fault_fails_only_its_message_and_delays_no_other(db, twilio, caplog, code, message):
    """Refusals that depend on the destination (its country, its carrier): one user's chosen number
    fails its own message and blames nobody's number; the invocation's other sends go out at once,
    nobody else's backoff changes, and nobody is paged."""
    ids = seed_intents(db, 4, sms_every=1)
    twilio.by_destination[destination(db, ids[0])] = FakeTwilio.error(400, code, message)
    settings = provider_settings(twilio=twilio, send_concurrency=1)
    with caplog.at_level(logging.WARNING, logger="signup_verification.delivery"):
        report = run_dispatch(db, settings)
    assert (report.failed, report.accepted, report.retryable) == (1, 3, 0) and twilio.requests == 4
    failed = intent(db, ids[0])
    assert (failed["status"], failed["failure_code"], failed["failure_fault"]) == (
        "failed", str(code), "sender_or_account")  # fmt: skip
    assert all(intent(db, i)["status"] == "accepted" for i in ids[1:])
    assert db.run("SELECT count(*) FROM destination_suppressions")[0][0] == 0
    assert db.run("SELECT count(*) FROM channel_holds WHERE route = ''")[0][0] == 0  # the channel's run: untouched
    assert not [r for r in caplog.records if getattr(r, "json_fields", {}).get("alert")]  # no operator alert


@pytest.mark.parametrize(
    "code,message",
    [
        (21661, "'From' number is not SMS-capable"),
        (21660, "Mismatch between the 'From' number and the account"),
        (63038, "Account exceeded the daily messages limit"),
        (30002, "Account suspended"),
    ],
)
def test_a_sender_that_cannot_send_stops_the_channel_and_alerts(db, twilio, caplog, code, message):
    """When the account itself cannot send, every SMS would fail for good: the first refusal fails its
    message (never suppressing the number), stops the channel for the invocation (the rest wait,
    not charged) and pages, as refused credentials do."""
    ids = seed_intents(db, 4, sms_every=1)
    twilio.by_destination[destination(db, ids[0])] = FakeTwilio.error(400, code, message)
    settings = provider_settings(twilio=twilio, send_concurrency=1)
    with caplog.at_level(logging.WARNING, logger="signup_verification.delivery"):
        report = run_dispatch(db, settings)
    assert (report.failed, report.retryable) == (1, 3) and twilio.requests == 1
    failed = intent(db, ids[0])
    assert (failed["status"], failed["failure_code"], failed["failure_fault"]) == (
        "failed", str(code), "sender_or_account")  # fmt: skip
    assert db.run("SELECT count(*) FROM destination_suppressions")[0][0] == 0
    assert db.run("SELECT faults FROM channel_holds WHERE channel = 'sms' AND route = ''")[0][0] == 1
    assert [r for r in caplog.records if getattr(r, "json_fields", {}).get("alert")]


def test_a_stopped_channel_charges_no_attempt_to_the_sends_it_skipped(db, twilio):
    ids = seed_intents(db, 3, sms_every=1, max_attempts=1)  # the last allowed attempt: a charge would fail them
    settings = provider_settings(twilio=twilio, twilio_auth_token="wrong", send_concurrency=1)
    report = run_dispatch(db, settings)
    assert (report.failed, report.retryable) == (1, 2) and twilio.requests == 1
    for skipped in ids[1:]:
        row = intent(db, skipped)
        assert row["status"] == "retryable" and row["completed_at"] is None
        assert row["max_attempts"] - row["attempts"] == 1  # its one real send is still allowed
        assert attempts(db, skipped)[-1] == (f"{skipped}:1", "retryable", "channel_stopped")
    # Credentials fixed: each skipped intent gets its one real send, under a fresh attempt id.
    db.run("UPDATE delivery_intents SET next_attempt_at = now() WHERE status = 'retryable'")
    report = run_dispatch(db, provider_settings(twilio=twilio, send_concurrency=1))
    assert report.accepted == 2 and twilio.requests == 3
    assert [a[0] for a in attempts(db, ids[1]) if a[1] == "accepted"] == [f"{ids[1]}:2"]


def test_a_send_cut_by_shutdown_on_the_last_attempt_stays_eligible(db, twilio):
    twilio.default_delay = 0.5
    seed_intents(db, 4, sms_every=1, max_attempts=1)
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    report = run_dispatch(
        db, provider_settings(twilio=twilio, send_concurrency=1, dispatch_batch_seconds=30), stop=stop
    )
    assert (report.accepted, report.retryable, report.failed) == (1, 3, 0)
    rows = db.rows("SELECT status, last_error FROM delivery_intents WHERE status <> 'accepted'")
    assert len(rows) == 3 and all(r["status"] == "retryable" and r["last_error"].startswith("not_sent") for r in rows)


def test_a_sendgrid_block_waits_long_alerts_and_stops_email_without_charging_attempts(db, caplog):
    from support.fakes.http import Answer, FakeSendGrid

    with FakeSendGrid() as sendgrid:
        sendgrid.script(
            Answer(
                403,
                {
                    "errors": [
                        {
                            "field": None,
                            "message": "You have been temporarily blocked from "
                            "making requests due to repeated bad requests.",
                        }
                    ]
                },
            )
        )
        ids = seed_intents(db, 3)
        settings = provider_settings(
            email_transport="sendgrid",
            sendgrid_api_key=sendgrid.api_key,
            sendgrid_api_url=sendgrid.send_url,
            send_concurrency=1,
        )
        with caplog.at_level(logging.ERROR, logger="signup_verification"):
            report = run_dispatch(db, settings)
        assert (report.retryable, report.failed, sendgrid.requests) == (3, 0, 1)
    [alert] = [r for r in caplog.records if getattr(r, "json_fields", {}).get("alert")]
    assert alert.json_fields["alert"] == "provider_blocked"
    blocked = db.one(
        "SELECT status, attempts, extract(epoch FROM next_attempt_at - now()) AS wait "
        "FROM delivery_intents WHERE id = :id",
        id=ids[0],
    )
    assert blocked["status"] == "retryable" and blocked["wait"] > 1500  # long, not the 60 s first backoff
    for skipped in ids[1:]:
        row = intent(db, skipped)
        assert row["status"] == "retryable" and row["max_attempts"] - row["attempts"] == 5
