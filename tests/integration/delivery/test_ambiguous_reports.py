"""A final report settles an ambiguous send, through the real worker, the fake Twilio, the
delivery_reports target and a real PostgreSQL: the create request went out and its answer was lost
(a timeout, a 500 after Twilio created the message), so the attempt is ambiguous; Twilio's signed
callback naming that attempt proves the message or call was created, and its final status ends the
step at once with its reason. The next step comes forward now, the ambiguity policy has nothing left
to retry (no second message or call to the person), the Twilio lookup finds nothing to do, and a
report about an older attempt changes nothing. A report that it arrived settles it as sent. Either way
the attempt log's settlement names the message or call by the report's sid: our own answer never
came. A message or call the lookup found takes its later reports as any accepted send does."""

from __future__ import annotations

import base64
import dataclasses
import time

import pytest

from signup_verification.operations.reconciler.runner import reconcile
from support.dispatch import provider_settings, run_dispatch
from support.factories import created
from support.fakes.http import Answer
from support.fakes.twilio import FakeTwilio
from support.fakes.twilio_callbacks import post_callbacks
from support.reports import REPORTS_URL, reports_env

MOBILE = "+14155550100"
OTHER = "+14155550123"
WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"a" * 32).decode()


@pytest.fixture
def reports(configured_app, twilio):
    env = reports_env(TWILIO_AUTH_TOKEN=twilio.auth_token, TWILIO_ACCOUNT_SID=twilio.account_sid,
                      TWILIO_API_URL=twilio.url, WEBHOOK_URL="http://receiver.invalid/hooks",
                      WEBHOOK_SECRET=WEBHOOK_SECRET, WEBHOOK_EVENTS="delivery.bounced,delivery.failed")  # fmt: skip
    return configured_app("delivery_reports", **env)


def settings_for(smtp, twilio, channel: str, policy: str = "retry"):
    """The channel's ambiguity policy `policy` with no hold: what would send again at once."""
    return provider_settings(smtp, twilio, delivery_reports_url=REPORTS_URL, send_timeout_seconds=0.5,
                             **{f"ambiguous_policy_{channel}": policy,
                                f"ambiguous_hold_seconds_{channel}": 0})  # fmt: skip


def two_steps(db, settings, channel: str, then: str = "email"):
    then_to = "ada@example.com" if then == "email" else OTHER
    fallback = {"channel": then, "destination": then_to, "after_seconds": 300}
    return created(db, MOBILE, channel=channel, fallback=fallback, config=settings.create)


def steps(db, vid) -> tuple[dict, dict]:
    first, second = db.rows(
        "SELECT * FROM delivery_intents WHERE verification_id = :v AND role <> 'event' ORDER BY id", v=vid
    )
    return first, second


def report(reports, twilio: FakeTwilio, delivery, sid: str, outcome: str) -> list[dict]:
    """Twilio's callbacks for `outcome` about `sid`, signed for the StatusCallback URL `delivery`'s
    request carried: what the target answered each."""
    url = delivery.request["StatusCallback"]
    answers: list[dict] = []

    def send(body: bytes, headers: dict[str, str]) -> int:
        answer = reports.post(url.removeprefix(REPORTS_URL), data=body, headers=headers)
        answers.append(answer.get_json())
        return answer.status_code

    assert set(post_callbacks(twilio, url, sid, delivery.destination, send, outcome)) == {200}
    return answers


def placed_call(twilio: FakeTwilio) -> str:
    """The sid of the one call Twilio created (it answers the create request late: polled, at most 5 s)."""
    for _ in range(500):
        if twilio.calls:
            [sid] = list(twilio.calls)
            return sid
        time.sleep(0.01)
    raise AssertionError("Twilio never created the call")


def attempt_log(db, intent_id: int) -> list[tuple[str, str | None]]:
    rows = db.rows("SELECT outcome, error_class FROM delivery_attempts WHERE intent_id = :i ORDER BY id", i=intent_id)
    return [(r["outcome"], r["error_class"]) for r in rows]


def calls(twilio: FakeTwilio) -> int:
    return sum(1 for d in twilio.deliveries if "Twiml" in d.request)


def test_a_call_that_timed_out_then_rang_unanswered_fails_the_step_and_brings_the_sms_forward(
    db, reports, smtp, twilio
):
    settings = settings_for(smtp, twilio, "voice")
    vid = two_steps(db, settings, "voice", then="sms")
    twilio.script(Answer(delay=1.5))  # Twilio creates the call, its answer comes after our timeout
    assert run_dispatch(db, settings).ambiguous == 1
    sid = placed_call(twilio)
    [delivery] = twilio.deliveries
    [answer] = report(reports, twilio, delivery, sid, "no-answer")
    assert (answer["stored"], answer["undeliverable"]) == (1, 1)
    call, sms = steps(db, vid)
    assert (call["status"], call["failure_category"], call["failure_code"], call["failure_provider"],
            call["failure_fault"]) == ("failed", "unreachable", "no-answer", "twilio", "transient_or_unknown")  # fmt: skip
    assert call["undeliverable_reason"].startswith("no_answer") and call["provider_ref"] == sid
    assert attempt_log(db, call["id"]) == [("attempting", None), ("ambiguous", "timeout_after_send"),
                                           ("accepted", "provider_report")]  # fmt: skip
    assert sms["brought_forward_at"] is not None
    assert db.one("SELECT next_attempt_at <= now() AS due FROM delivery_intents WHERE id = :i", i=sms["id"])["due"]
    # the site hears of the step: failed for good (undeliverable: it was placed), with Twilio's reason
    [bounced] = db.rows("SELECT payload FROM delivery_intents WHERE verification_id = :v AND role = 'event'"
                        " AND event_type = 'delivery.bounced'", v=vid)  # fmt: skip
    said = bounced["payload"]["delivery"]
    assert (said["step"], said["channel"], said["status"]) == (1, "voice", "undeliverable")
    assert said["reason"] == {"category": "unreachable", "code": "no-answer", "provider": "twilio",
                              "fault": "transient_or_unknown"}  # fmt: skip
    # the ambiguity policy (retry, no hold) finds nothing to retry; the next dispatch sends the SMS only
    assert reconcile(db, settings.reconciler, emit_signals=False).moves.get("ambiguous_to_retryable", 0) == 0
    assert run_dispatch(db, settings).accepted == 1
    assert calls(twilio) == 1 and [d.destination for d in twilio.deliveries][1:] == [OTHER]
    assert steps(db, vid)[0]["status"] == "failed"


def test_an_ambiguous_whatsapp_message_reported_undelivered_fails_and_the_email_goes_now(db, reports, smtp, twilio):
    settings = settings_for(smtp, twilio, "whatsapp")
    vid = two_steps(db, settings, "whatsapp")
    twilio.script(FakeTwilio.error(500, 20500, "Internal Server Error", deliver=True))  # created, then a 500
    assert run_dispatch(db, settings).ambiguous == 1
    [delivery] = twilio.deliveries
    sid = twilio.message(delivery)["sid"]
    answers = report(reports, twilio, delivery, sid, "undelivered:63003")
    assert [a["undeliverable"] for a in answers] == [0, 0, 1]
    message, email = steps(db, vid)
    assert (message["status"], message["failure_code"], message["provider_ref"]) == ("failed", "63003", sid)
    assert message["undeliverable_reason"] is not None and email["brought_forward_at"] is not None
    reconcile(db, settings.reconciler, emit_signals=False)
    assert run_dispatch(db, settings).accepted == 1 and len(smtp.received) == 1
    assert len(twilio.deliveries) == 1  # no second WhatsApp message


def no_lookup(settings):
    """The reconciler without the Twilio lookup: the ambiguity policy alone decides."""
    return dataclasses.replace(settings.reconciler, twilio_lookup=None)


def lookup_config(settings):
    lookup = dataclasses.replace(settings.reconciler.twilio_lookup, min_interval_seconds=0.0, settle_seconds=0.001)
    return dataclasses.replace(settings.reconciler, twilio_lookup=lookup)


@pytest.mark.parametrize(("channel", "outcome"), [("whatsapp", "delivered"), ("voice", "human")])
def test_a_message_or_call_the_lookup_found_takes_its_later_reports(db, reports, smtp, twilio, channel, outcome):
    """Ambiguous (500 after Twilio created it), found by the reconciler's lookup: accepted with its
    sid, and Twilio's later callbacks about that sid settle it delivered; nothing is sent again."""
    settings = settings_for(smtp, twilio, channel, policy="hold")
    vid = two_steps(db, settings, channel)
    twilio.script(FakeTwilio.error(500, 20500, "Internal Server Error", deliver=True))
    assert run_dispatch(db, settings).ambiguous == 1
    [delivery] = twilio.deliveries
    sid = twilio.message(delivery)["sid"]
    assert reconcile(db, lookup_config(settings), emit_signals=False).moves["ambiguous_lookup_to_accepted"] == 1
    found, _ = steps(db, vid)
    assert (found["status"], found["provider_ref"]) == ("accepted", sid)
    assert attempt_log(db, found["id"])[-1] == ("accepted", "provider_lookup_found")
    answers = report(reports, twilio, delivery, sid, outcome)
    assert sum(a["stored"] for a in answers) >= 2 and sum(a["undeliverable"] for a in answers) == 0
    message, _ = steps(db, vid)
    assert message["status"] == "accepted" and message["delivered_at"] is not None
    observed = db.rows("SELECT provider_ref FROM delivery_observations WHERE intent_id = :i", i=message["id"])
    assert observed and {o["provider_ref"] for o in observed} == {sid}
    reconcile(db, settings.reconciler, emit_signals=False)
    run_dispatch(db, settings)
    _, email = steps(db, vid)
    assert len(twilio.deliveries) == 1 and email["brought_forward_at"] is None  # no second message or call


def test_an_ambiguous_sms_reported_final_is_applied_once_whatever_the_lookup_finds(db, reports, smtp, twilio):
    settings = settings_for(smtp, twilio, "sms", policy="hold")
    vid = two_steps(db, settings, "sms")
    twilio.script(FakeTwilio.error(500, 20500, "Internal Server Error", deliver=True))
    assert run_dispatch(db, settings).ambiguous == 1
    [delivery] = twilio.deliveries
    report(reports, twilio, delivery, twilio.message(delivery)["sid"], "undelivered:30003")
    message, email = steps(db, vid)
    assert (message["status"], message["failure_code"]) == ("failed", "30003")
    events = db.rows("SELECT id FROM delivery_intents WHERE verification_id = :v AND role = 'event'", v=vid)
    done = reconcile(db, lookup_config(settings), emit_signals=False)
    assert not any(k.startswith("ambiguous_lookup_to_") and n for k, n in done.moves.items())
    assert twilio.list_requests == []  # nothing ambiguous is left to look up
    again, email_again = steps(db, vid)
    assert {k: again[k] for k in ("status", "failed_at", "failure_code", "completed_at", "provider_ref")} == {
        k: message[k] for k in ("status", "failed_at", "failure_code", "completed_at", "provider_ref")
    }
    assert email_again["brought_forward_at"] == email["brought_forward_at"]
    assert db.rows("SELECT id FROM delivery_intents WHERE verification_id = :v AND role = 'event'", v=vid) == events
    assert len(attempt_log(db, message["id"])) == 3
    assert run_dispatch(db, settings).accepted == 1 and len(twilio.deliveries) == 1


@pytest.mark.parametrize("second", ["accepted", "ambiguous"])
def test_a_final_report_of_an_older_attempt_changes_nothing(db, reports, smtp, twilio, second):
    """Attempt 1 ambiguous, retried once its hold passed; attempt 2 sent (or ambiguous too). Twilio's
    final report of attempt 1's message says nothing about attempt 2's."""
    settings = settings_for(smtp, twilio, "sms")
    vid = two_steps(db, settings, "sms")
    twilio.script(FakeTwilio.error(500, 20500, "Internal Server Error", deliver=True))
    assert run_dispatch(db, settings).ambiguous == 1
    assert reconcile(db, no_lookup(settings), emit_signals=False).moves["ambiguous_to_retryable"] == 1
    if second == "ambiguous":
        twilio.script(FakeTwilio.error(500, 20500, "Internal Server Error", deliver=True))
    assert getattr(run_dispatch(db, settings), second) == 1
    first, _ = twilio.deliveries
    before, email = steps(db, vid)
    answers = report(reports, twilio, first, twilio.message(first)["sid"], "undelivered:30003")
    assert sum(a["stored"] for a in answers) == 3 and sum(a["undeliverable"] for a in answers) == 0
    after, email_after = steps(db, vid)
    assert (after["status"], after["attempts"], after["failed_at"], after["undeliverable_reason"]) == (
        second,
        2,
        None,
        None,
    )
    assert after["provider_ref"] == before["provider_ref"] and email_after["brought_forward_at"] is None
    assert [o for o, _ in attempt_log(db, after["id"])].count("accepted") == (1 if second == "accepted" else 0)


def test_a_report_of_the_attempt_a_retry_waits_to_replace_settles_it_before_the_retry(db, reports, smtp, twilio):
    """The hold passed and the policy made the intent retryable; before the next claim Twilio reports
    the ambiguous attempt's message final: it was sent, so nothing is sent again."""
    settings = settings_for(smtp, twilio, "sms")
    vid = two_steps(db, settings, "sms")
    twilio.script(FakeTwilio.error(500, 20500, "Internal Server Error", deliver=True))
    assert run_dispatch(db, settings).ambiguous == 1
    assert reconcile(db, no_lookup(settings), emit_signals=False).moves["ambiguous_to_retryable"] == 1
    [delivery] = twilio.deliveries
    report(reports, twilio, delivery, twilio.message(delivery)["sid"], "failed:30006")
    message, email = steps(db, vid)
    assert (message["status"], message["failure_code"], message["attempts"]) == ("failed", "30006", 1)
    assert email["brought_forward_at"] is not None
    assert run_dispatch(db, settings).accepted == 1 and len(twilio.deliveries) == 1 and len(smtp.received) == 1


@pytest.mark.parametrize("channel", ["sms", "whatsapp", "voice"])
def test_an_ambiguous_send_reported_delivered_is_accepted_and_names_the_message_or_call(
    db, reports, smtp, twilio, channel
):
    """Our request's answer was lost; Twilio's report that the message arrived (a call a person
    answered) settles the attempt as sent. Its MessageSid or CallSid is the only reference we have of
    it: the attempt log's settlement and the step carry it."""
    settings = settings_for(smtp, twilio, channel, policy="hold")
    vid = two_steps(db, settings, channel)
    if channel == "voice":
        twilio.script(Answer(delay=1.5))  # Twilio places the call, its answer comes after our timeout
    else:
        twilio.script(FakeTwilio.error(500, 20500, "Internal Server Error", deliver=True))  # created, then a 500
    assert run_dispatch(db, settings).ambiguous == 1
    [delivery] = twilio.deliveries
    sid = placed_call(twilio) if channel == "voice" else twilio.message(delivery)["sid"]
    report(reports, twilio, delivery, sid, "human" if channel == "voice" else "delivered")
    step, email = steps(db, vid)
    assert (step["status"], step["delivered_at"] is not None, step["provider_ref"]) == ("accepted", True, sid)
    logged = db.rows("SELECT outcome, error_class, provider_ref FROM delivery_attempts WHERE intent_id = :i"
                     " ORDER BY id", i=step["id"])  # fmt: skip
    assert [r["outcome"] for r in logged] == ["attempting", "ambiguous", "accepted"]
    assert (logged[-1]["error_class"], logged[-1]["provider_ref"]) == ("provider_report", sid)
    assert email["brought_forward_at"] is None
