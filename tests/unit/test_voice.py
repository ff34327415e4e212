"""A voice call through Twilio's Calls API, against the local fake: inline TwiML in the verification's
language reading the code digit by digit twice, answering machine detection in the background, the
refusal codes, the call's final statuses and AMD results mapped onto the outcome model, and the code
never in a result, a repr or a provider text."""

from __future__ import annotations

import xml.etree.ElementTree as ET  # nosec B405: parses the TwiML our own adapter sent
from urllib.parse import parse_qs

import pytest

from signup_verification.delivery import templates
from signup_verification.delivery.classification import Category, Fault, Scope, Verdict
from signup_verification.delivery.classification import twilio_voice as table
from support.channels import render, soon, voice_channel
from support.fakes.twilio import FakeTwilio

CURRENT = templates.current_version("signup")
LANDLINE = "+442071838750"  # a London landline: callable, though never an SMS destination


@pytest.fixture(scope="module")
def twilio():
    with FakeTwilio() as fake:
        yield fake


def _form(exchange) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(exchange.body.decode()).items()}


@pytest.mark.parametrize("locale", templates.locales(CURRENT))
def test_the_call_carries_its_twiml_inline_and_detects_machines_in_the_background(twilio, locale):
    message = render("voice", LANDLINE, version=CURRENT, locale=locale)
    callback = "https://verify.example.org/twilio"
    result = voice_channel(twilio, status_callback=callback, ring_seconds=25, limit_seconds=60).send(message, soon())
    assert result.outcome == "accepted" and result.provider_ref.startswith("CA")
    assert twilio.exchanges[-1].path.endswith("/Calls.json")
    form = _form(twilio.exchanges[-1])
    assert (form["To"], form["From"]) == (LANDLINE, "+15005550006") and "Url" not in form
    assert (form["MachineDetection"], form["AsyncAmd"], form["Timeout"], form["TimeLimit"]) == (
        "Enable",
        "true",
        "25",
        "60",
    )
    assert form["StatusCallback"] == form["AsyncAmdStatusCallback"] == f"{callback}?attempt={message.attempt_id}"
    say = ET.fromstring(form["Twiml"].encode()).find("Say")
    assert say is not None and say.text == message.speech and say.get("language") == message.language
    assert message.speech.count(", ".join(message.secret)) == 2
    assert twilio.deliveries[-1].body == message.speech  # the fake's call says it


@pytest.mark.parametrize("code", sorted(table.ERRORS))
def test_every_call_refusal_code(twilio, code):
    message = render("voice", LANDLINE, version=CURRENT)
    twilio.script(FakeTwilio.error(400, code, f"Twilio error {code} about {LANDLINE}: {message.secret}"))
    result = voice_channel(twilio).send(message, soon())
    rule = table.ERRORS[code]
    assert result.outcome == "failed" and result.verdict == Verdict.of(rule, "twilio", str(code))
    assert result.stops_channel == (rule.scope is Scope.ACCOUNT)
    assert result.verdict.suppresses == (rule.fault is Fault.RECIPIENT)
    assert LANDLINE not in result.detail and message.secret not in result.detail


def test_a_landline_is_never_refused_as_not_a_mobile():
    assert not {21614, 21635} & set(table.ERRORS)
    assert all(rule.category is not Category.NOT_MOBILE for rule in table.ERRORS.values())


def test_a_5xx_is_ambiguous_the_call_may_have_been_placed(twilio):
    twilio.script(FakeTwilio.error(500, 20500, "Internal Server Error"))
    assert voice_channel(twilio).send(render("voice", LANDLINE, version=CURRENT), soon()).outcome == "ambiguous"


@pytest.mark.parametrize("answered_by", [None, "human", "unknown"])
def test_a_completed_call_answered_by_a_person_delivered_the_code(answered_by):
    assert table.observed("completed", answered_by) == ("delivered", None)


@pytest.mark.parametrize("answered_by", sorted(table.ANSWERED_BY))
def test_a_machine_is_final_and_nobodys_fault(answered_by):
    outcome, verdict = table.observed("completed", answered_by)
    assert outcome == "failed" and verdict is not None and verdict.final and verdict.code == answered_by
    assert verdict.category is Category.UNREACHABLE and not verdict.suppresses and not verdict.holds_channel


@pytest.mark.parametrize("status", ["busy", "no-answer", "failed", "canceled", "something-new"])
def test_a_call_not_answered_is_final_for_its_step_and_suppresses_nothing(status):
    outcome, verdict = table.observed(status)
    assert outcome == "failed" and verdict is not None and verdict.final and verdict.code == status
    assert not verdict.suppresses and verdict.scope is Scope.MESSAGE


@pytest.mark.parametrize("status", sorted(table.NOT_FINAL))
def test_a_call_in_progress_is_not_final(status):
    assert table.observed(status, "human") == ("pending", None)


def test_the_content_never_shows_the_code_or_the_number():
    message = render("voice", LANDLINE, version=CURRENT)
    shown = repr(message) + str(message)
    assert message.secret not in shown and LANDLINE not in shown and "***" in shown
