"""WhatsApp and voice end to end: create through the HTTP stack, dispatch through the real worker to
a Twilio-speaking local server (every request it receives checked against Twilio's own spec), and
confirm through the confirm target. Each code channel carries its own code, so the proof names the
channel that delivered it; a landline is callable but cannot receive a text."""

from __future__ import annotations

import dataclasses
import re
import uuid

import pytest

from signup_verification.api.problems import Problem
from support.dispatch import provider_settings, run_dispatch
from support.factories import SETTINGS, create, written
from support.fakes.twilio import FakeTwilio
from support.provider_specs import TWILIO_CALLS, TWILIO_MESSAGES, as_request, twilio_contract
from support.signup_requests import post_create

MOBILE = "+14155550100"
LANDLINE = "+442079460000"  # a London number: phonenumbers' FIXED_LINE


@pytest.fixture
def twilio():
    with FakeTwilio() as fake:
        yield fake


@pytest.fixture
def targets(configured_app):
    create = configured_app("create_verification", RATE_LIMIT_SPACING_SECONDS="0")
    return create, configured_app("confirm_verification")


def _created(create, body: dict, key: str) -> uuid.UUID:
    response = post_create(create, {"account_id": "acct-1", **body}, key)
    assert response.status_code == 201, response.get_data(as_text=True)
    return uuid.UUID(response.get_json()["verification_id"])


def _code(text: str) -> str:
    """The code a message carries: six digits, or six digits spoken one at a time ('1, 2, 3, ...')."""
    found = re.search(r"\d(?:, \d){5}", text)
    return found.group(0).replace(", ", "") if found else re.search(r"\d{6}", text).group(0)


def _check_against_twilios_spec(twilio: FakeTwilio) -> None:
    """Every request the dispatcher made, validated against the operation it calls in Twilio's spec."""
    for exchange in twilio.exchanges:
        path = TWILIO_CALLS if exchange.path.endswith("/Calls.json") else TWILIO_MESSAGES
        contract = twilio_contract(path)
        contract.validate_request(as_request(exchange, contract.server(path)))


@pytest.mark.parametrize("channel", ["whatsapp", "voice"])
def test_create_dispatch_confirm_on_a_phone_channel(db, targets, twilio, channel):
    create, confirm = targets
    vid = _created(create, {"channel": channel, "destination": "+1 415 555 0100"}, "k1")
    report = run_dispatch(db, provider_settings(twilio=twilio))
    assert report.accepted == 1
    [delivery] = twilio.deliveries
    assert delivery.destination == ("whatsapp:" + MOBILE if channel == "whatsapp" else MOBILE)
    if channel == "whatsapp":  # an approved template by its content SID, the code its one variable
        assert set(delivery.request) >= {"ContentSid", "ContentVariables"} and "Body" not in delivery.request
    else:  # TwiML inline: the code spoken digit by digit, twice
        assert "Twiml" in delivery.request and "Url" not in delivery.request
        assert len(re.findall(r"\d(?:, \d){5}", delivery.body)) == 2
    _check_against_twilios_spec(twilio)
    answer = confirm.post("/", json={"verification_id": str(vid), "code": _code(delivery.body)})
    assert answer.status_code == 200, answer.get_data(as_text=True)
    body = answer.get_json()
    assert (body["channel"], body["verified_channel"], body["verified_via"]) == (channel, channel, "code")
    assert body["proof"]["channel"] == channel and body["proof"]["destination"] != MOBILE  # masked
    assert db.run("SELECT status, verified_channel FROM verifications") == [["verified", channel]]


def test_a_code_delivered_by_whatsapp_proves_as_whatsapp_and_the_sms_code_is_another(db, targets, twilio):
    create, confirm = targets
    steps = [
        {"channel": "whatsapp", "destination": MOBILE},
        {"channel": "sms", "destination": MOBILE, "after_seconds": 0},  # both at once
    ]
    vid = _created(create, {"steps": steps}, "k1")
    settings = provider_settings(twilio=twilio)
    run_dispatch(db, settings)
    if len(twilio.deliveries) < 2:
        run_dispatch(db, settings)
    by_channel = {("whatsapp" if d.destination.startswith("whatsapp:") else "sms"): d for d in twilio.deliveries}
    whatsapp_code, sms_code = _code(by_channel["whatsapp"].body), _code(by_channel["sms"].body)
    assert whatsapp_code != sms_code  # each channel its own code (1 in a million alike: not with this key)
    _check_against_twilios_spec(twilio)
    answer = confirm.post("/", json={"verification_id": str(vid), "code": whatsapp_code}).get_json()
    assert (answer["verified_channel"], answer["proof"]["channel"]) == ("whatsapp", "whatsapp")
    # a wrong code now is wrong for the SMS, which can still prove: counted, tries left
    wrong = confirm.post("/", json={"verification_id": str(vid), "code": "000000" if sms_code != "000000" else "1" * 6})
    assert wrong.status_code == 422 and wrong.get_json()["remaining_attempts"] == 4
    # the SMS code proves its own channel afterwards (the second proof), and says so
    later = confirm.post("/", json={"verification_id": str(vid), "code": sms_code}).get_json()
    assert (later["verified_channel"], later["proof"]["channel"]) == ("whatsapp", "sms")
    assert [p["channel"] for p in later["proofs"]] == ["whatsapp", "sms"]


def test_a_wrong_code_counts_once_whichever_channels_the_verification_has(db, targets, twilio):
    create, confirm = targets
    steps = [{"channel": "voice", "destination": MOBILE}, {"channel": "whatsapp", "destination": MOBILE}]
    vid = _created(create, {"steps": steps}, "k1")
    wrong = confirm.post("/", json={"verification_id": str(vid), "code": "000000"})
    assert wrong.status_code == 422 and wrong.get_json()["remaining_attempts"] == 4
    assert db.run("SELECT confirm_failures FROM verifications") == [[1]]


@pytest.mark.parametrize("channel", ["sms", "whatsapp"])
def test_a_landline_is_refused_for_a_text(create_app, db, channel):
    client = create_app()
    primary = post_create(client, {"account_id": "acct-1", "channel": channel, "destination": LANDLINE}, "k1")
    steps = [{"channel": "email", "destination": "ada@example.com"}, {"channel": channel, "destination": LANDLINE}]
    second = post_create(client, {"account_id": "acct-1", "steps": steps}, "k2")
    for response, pointer in ((primary, "#/destination"), (second, "#/steps/1/destination")):
        assert response.status_code == 422 and response.mimetype == "application/problem+json"
        problem = response.get_json()
        assert problem["type"].endswith("sms-number-type-not-allowed")
        assert problem["title"] == "This kind of number cannot receive the code"  # one title per type
        assert "landline" in problem["detail"] and "voice" in problem["detail"]
        assert problem["errors"] == [{"pointer": pointer, "detail": "landline: voice only"}]
        assert LANDLINE not in response.get_data(as_text=True)
    assert written(db) == (0, 0, 0, 0)


def test_a_landline_is_called(db, targets, twilio):
    create, _ = targets
    _created(create, {"channel": "voice", "destination": LANDLINE}, "k1")
    assert run_dispatch(db, provider_settings(twilio=twilio)).accepted == 1
    assert [d.destination for d in twilio.deliveries] == [LANDLINE]
    _check_against_twilios_spec(twilio)


@pytest.mark.parametrize("channel", ["whatsapp", "voice"])
def test_the_number_policy_covers_the_new_channels(create_app, db, channel):
    client = create_app(SMS_ALLOWED_COUNTRIES="US")
    refused = post_create(client, {"account_id": "acct-1", "channel": channel, "destination": "+33612345678"}, "k1")
    assert refused.status_code == 422 and refused.get_json()["type"].endswith("sms-country-not-allowed")
    premium = post_create(client, {"account_id": "acct-1", "channel": channel, "destination": "+19005550100"}, "k2")
    assert premium.status_code == 422 and premium.get_json()["type"].endswith("sms-number-type-not-allowed")
    assert written(db) == (0, 0, 0, 0)


@pytest.mark.parametrize("channel", ["whatsapp", "voice"])
def test_a_number_that_is_not_e164_is_a_field_error(create_app, db, channel):
    response = post_create(create_app(), {"account_id": "acct-1", "channel": channel, "destination": "415 555"}, "k1")
    assert response.status_code == 400
    assert [e["pointer"] for e in response.get_json()["errors"]] == ["#/destination"]
    assert written(db) == (0, 0, 0, 0)


@pytest.mark.parametrize("channel", ["whatsapp", "voice"])
def test_in_production_a_channel_without_its_transport_is_not_offered(db, channel):
    """An upgrade offers no channel its operator has not set up: in production create refuses WhatsApp
    and voice until their transport is `twilio` (a console transport would fail every send there)."""
    production = dataclasses.replace(SETTINGS.create, production=True)
    with pytest.raises(Problem) as refused:
        create(db, MOBILE, channel=channel, config=production)
    assert (refused.value.status, refused.value.slug) == (422, "channel-not-offered")
    assert refused.value.errors == [{"pointer": "#/channel", "detail": "channel not offered"}]
    fallback = {"channel": channel, "destination": MOBILE, "after_seconds": 30}
    with pytest.raises(Problem) as as_fallback:
        create(db, "ada@example.com", fallback=fallback, config=production)
    assert as_fallback.value.errors == [{"pointer": "#/fallback/channel", "detail": "channel not offered"}]
    assert written(db) == (0, 0, 0, 0)
    offered = dataclasses.replace(production, **{f"{channel}_transport": "twilio"})
    assert create(db, MOBILE, channel=channel, config=offered).status == 201
