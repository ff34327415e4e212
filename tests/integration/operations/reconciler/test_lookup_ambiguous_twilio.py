"""Ambiguous Twilio sends resolved by asking Twilio's list APIs: an SMS or a WhatsApp message in the
Messages list, a call in the Calls list. Found -> accepted with its sid, provably absent -> retried
once, unsure or failing lookups -> left as they are. Never sends; every list request it makes, and
every answer the fake gives it, is checked against Twilio's own spec."""

from __future__ import annotations

import dataclasses

import pytest

from signup_verification.operations.reconciler.runner import reconcile
from support.dispatch import attempts, provider_settings, run_dispatch
from support.factories import created
from support.fakes.http import Answer
from support.fakes.twilio import FakeTwilio
from support.provider_specs import TWILIO_CALLS, TWILIO_MESSAGES, as_request, as_response, twilio_contract

CHANNELS = ("sms", "whatsapp", "voice")
LISTED_AS = {"sms": ("Messages.json", "+1415"), "whatsapp": ("Messages.json", "whatsapp:+1415"),
             "voice": ("Calls.json", "+1415")}  # fmt: skip
FROM = {"sms": "+15005550006", "whatsapp": "whatsapp:+15005550006", "voice": "+15005550006"}


@pytest.fixture
def twilio():
    with FakeTwilio() as fake:
        yield fake


def ambiguous(db, twilio, channel="sms", n=1, sent=True):
    """n sends of `channel` whose request answered 500 after Twilio created the message or call
    (sent) or without creating it."""
    settings = provider_settings(twilio=twilio)
    for i in range(n):
        created(db, f"+141555501{i:02d}", channel=channel, account=f"acct-{i}", key=f"k-{i}", config=settings.create)
    twilio.script(*[FakeTwilio.error(500, 20500, "Internal Server Error", deliver=sent) for _ in range(n)])
    assert run_dispatch(db, settings).ambiguous == n
    return settings


def reconcile_with_lookup(db, settings, **overrides):
    lookup = dataclasses.replace(settings.reconciler.twilio_lookup, min_interval_seconds=0.0, **overrides)
    return reconcile(db, dataclasses.replace(settings.reconciler, twilio_lookup=lookup), emit_signals=False)


def intents(db):
    return db.rows("SELECT id, channel, status, provider_ref, attempts FROM delivery_intents ORDER BY id")


def check_against_twilios_spec(twilio: FakeTwilio) -> int:
    """Every list request made (and the fake's answer to it) validated against Twilio's spec; how many."""
    listed = [e for e in twilio.exchanges if e.method == "GET"]
    for exchange in listed:
        path = TWILIO_CALLS if exchange.path.split("?")[0].endswith("/Calls.json") else TWILIO_MESSAGES
        contract = twilio_contract(path, "get")
        request = as_request(exchange, contract.server(path))
        contract.validate_request(request)
        if exchange.status == 200:
            contract.validate_response(request, as_response(exchange))
    return len(listed)


@pytest.mark.parametrize("channel", CHANNELS)
def test_found_message_or_call_is_accepted_with_its_sid(db, twilio, channel):
    settings = ambiguous(db, twilio, channel)
    sent_before = twilio.requests
    report = reconcile_with_lookup(db, settings)
    [row] = intents(db)
    [delivery] = twilio.deliveries
    assert row["status"] == "accepted" and row["provider_ref"] == twilio.message(delivery)["sid"]
    assert row["provider_ref"].startswith("CA" if channel == "voice" else "SM")
    assert report.moves["ambiguous_lookup_to_accepted"] == 1
    assert twilio.requests == sent_before  # looked up (GET), never sent
    assert [a[1] for a in attempts(db, row["id"])][-1] == "accepted"
    [asked] = twilio.list_requests
    resource, to = LISTED_AS[channel]
    assert f"/{resource}?" in asked and "To=" + to.replace(":", "%3A").replace("+", "%2B") in asked
    assert "From=" + FROM[channel].replace(":", "%3A").replace("+", "%2B") in asked
    assert check_against_twilios_spec(twilio) == 1


@pytest.mark.parametrize("channel", CHANNELS)
def test_absent_message_or_call_is_sent_exactly_once_after_the_listing_has_settled(db, twilio, channel):
    settings = ambiguous(db, twilio, channel, sent=False)
    report = reconcile_with_lookup(db, settings, settle_seconds=0.001)
    [row] = intents(db)
    assert row["status"] == "retryable" and report.moves["ambiguous_lookup_to_retryable"] == 1
    assert run_dispatch(db, settings).accepted == 1 and len(twilio.deliveries) == 1  # sent exactly once
    assert check_against_twilios_spec(twilio) == 1


@pytest.mark.parametrize("channel", CHANNELS)
def test_absent_but_not_settled_stays_ambiguous(db, twilio, channel):
    settings = ambiguous(db, twilio, channel, sent=False)
    reconcile_with_lookup(db, settings, settle_seconds=3600)
    assert intents(db)[0]["status"] == "ambiguous" and len(twilio.list_requests) == 1


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize(
    "answer",
    [
        FakeTwilio.error(500, 20500),
        FakeTwilio.error(429, 20429),
        Answer(200, {"x": 1}),
        Answer(200, None),
        Answer(200, {"messages": []}, delay=1.0),
    ],  # fmt: skip
    ids=["5xx", "429", "no-list", "no-body", "timeout"],
)
def test_a_failing_lookup_leaves_the_intent_as_it_is(db, twilio, channel, answer):
    settings = ambiguous(db, twilio, channel, sent=False)
    twilio.list_answers.append(answer)
    report = reconcile_with_lookup(db, settings, settle_seconds=0.001, timeout_seconds=0.3)
    assert intents(db)[0]["status"] == "ambiguous" and report.moves["lookup_failed"] == 1
    assert report.moves["ambiguous_lookup_to_retryable"] == 0


def test_a_whatsapp_lookup_lists_the_other_api_of_a_call_not_the_sms_to_the_same_number(db, twilio):
    """The same number's SMS is neither its WhatsApp message nor its call: each channel is looked up
    where Twilio lists it, and a message of another channel is no proof that this one was sent."""
    settings = ambiguous(db, twilio, "sms")  # an SMS Twilio created, to +14155550100
    reconcile_with_lookup(db, settings)  # settled as accepted with its sid
    for channel in ("whatsapp", "voice"):
        created(db, "+14155550100", channel=channel, account=f"a-{channel}", key=f"k-{channel}", config=settings.create)
    twilio.script(*[FakeTwilio.error(500, 20500, deliver=False)] * 2)
    assert run_dispatch(db, settings).ambiguous == 2
    report = reconcile_with_lookup(db, settings, settle_seconds=0.001)
    assert report.moves["ambiguous_lookup_to_retryable"] == 2
    assert [r["status"] for r in intents(db)] == ["accepted", "retryable", "retryable"]


def test_bad_credentials_stop_the_lookups_for_the_run(db, twilio):
    settings = ambiguous(db, twilio, "whatsapp", n=3)
    twilio.auth_token = "rotated"  # the fake now refuses the reconciler's credentials: 401
    reconcile_with_lookup(db, settings)
    assert len(twilio.list_requests) == 1  # the first 401 stops the duty: no hammering
    assert {r["status"] for r in intents(db)} == {"ambiguous"}


def test_calls_per_run_are_bounded_for_every_channel_together(db, twilio):
    settings = ambiguous(db, twilio, "sms")
    created(db, "+14155550150", channel="whatsapp", account="a-w", key="k-w", config=settings.create)
    created(db, "+14155550151", channel="voice", account="a-v", key="k-v", config=settings.create)
    twilio.script(*[FakeTwilio.error(500, 20500, deliver=True)] * 2)
    assert run_dispatch(db, settings).ambiguous == 2
    report = reconcile_with_lookup(db, settings, max_calls=2)
    assert len(twilio.list_requests) == 2 and report.moves["ambiguous_lookup_to_accepted"] == 2
    statuses = [r["status"] for r in intents(db)]
    assert statuses[0] == "accepted" and sorted(statuses[1:]) == ["accepted", "ambiguous"]  # oldest hold first
    assert reconcile_with_lookup(db, settings, max_calls=2).moves["ambiguous_lookup_to_accepted"] == 1


def test_lookups_follow_the_twilio_settings(db, twilio):
    settings = ambiguous(db, twilio, "voice")
    lookup = settings.reconciler.twilio_lookup
    assert lookup is not None and set(lookup.senders()) == set(CHANNELS)  # on by default for Twilio's channels
    only_calls = provider_settings(twilio=twilio, sms_transport="console", whatsapp_transport="console")
    assert set(only_calls.reconciler.twilio_lookup.senders()) == {"voice"}
    for off in ({"twilio_lookup": "off"}, {"sms_lookup": "off"}):  # the setting's earlier name still works
        assert provider_settings(twilio=twilio, **off).reconciler.twilio_lookup is None
    assert provider_settings(twilio=twilio, sms_lookup_settle_seconds=7).reconciler.twilio_lookup.settle_seconds == 7
    report = reconcile(db, dataclasses.replace(settings.reconciler, twilio_lookup=None), emit_signals=False)
    assert intents(db)[0]["status"] == "ambiguous" and twilio.list_requests == []
    assert any(d.duty == "lookup_ambiguous_twilio" and d.skipped for d in report.duties)


def test_a_channel_not_sent_through_twilio_is_not_looked_up(db, twilio):
    settings = ambiguous(db, twilio, "voice")
    lookup = dataclasses.replace(settings.reconciler.twilio_lookup, voice_transport="console")
    reconcile(db, dataclasses.replace(settings.reconciler, twilio_lookup=lookup), emit_signals=False)
    assert intents(db)[0]["status"] == "ambiguous" and twilio.list_requests == []


@pytest.mark.parametrize("channel", CHANNELS)
def test_a_message_or_call_another_attempt_explains_is_not_proof_of_this_one(db, twilio, channel):
    """An older signup's message or call to the same number, created inside the window, must not
    settle a newer attempt that Twilio never created as accepted (its code would never be sent)."""
    settings = ambiguous(db, twilio, channel)
    [delivery] = twilio.deliveries
    sid = twilio.message(delivery)["sid"]
    db.run(  # the message or call is another attempt's: an accepted attempt of an older intent names its sid
        "INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version,"
        " outcome, provider_ref) VALUES ('999999:1', 999999, 1, :channel, 'v1', 'accepted', :sid)",
        sid=sid,
        channel=channel,
    )
    report = reconcile_with_lookup(db, settings, settle_seconds=0.001)
    [row] = intents(db)
    assert row["status"] == "retryable" and row["provider_ref"] != sid
    assert report.moves["ambiguous_lookup_to_retryable"] == 1
