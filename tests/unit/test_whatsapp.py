"""WhatsApp through Twilio's Messages API, against the local fake: the approved authentication
template of the message's language by its content SID, the code as its only variable, the 63xxx
codes classified with their scope and fault, and the code never in a result, a repr or a log text."""

from __future__ import annotations

import json
from urllib.parse import parse_qs

import pytest

from signup_verification.delivery import templates
from signup_verification.delivery.classification import Category, Fault, Scope, Verdict
from signup_verification.delivery.classification import twilio as sms_table
from signup_verification.delivery.classification import twilio_whatsapp as table
from support.channels import PHONE, render, soon, whatsapp_channel
from support.fakes.twilio import FakeTwilio, whatsapp_contents

CURRENT = templates.current_version("signup")


@pytest.fixture(scope="module")
def twilio():
    with FakeTwilio() as fake:
        yield fake


def _form(exchange) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(exchange.body.decode()).items()}


@pytest.mark.parametrize("locale", templates.locales(CURRENT))
def test_the_message_is_the_languages_approved_template_with_the_code_as_its_variable(twilio, locale):
    message = render("whatsapp", PHONE, version=CURRENT, locale=locale)
    result = whatsapp_channel(twilio).send(message, soon())
    assert result.outcome == "accepted" and result.provider_ref.startswith("SM")
    form = _form(twilio.exchanges[-1])
    assert form["To"] == f"whatsapp:{PHONE}" and form["From"] == "whatsapp:+15005550006"
    assert form["ContentSid"] == whatsapp_contents()[locale]
    assert json.loads(form["ContentVariables"]) == {"1": message.secret} and "Body" not in form
    assert twilio.deliveries[-1].body == message.text  # the fake renders the template as WhatsApp shows it
    assert message.secret in message.text and "://" not in message.text


def test_a_bare_number_or_a_messaging_service_is_the_sender(twilio):
    whatsapp_channel(twilio, sender="+15005550006").send(render("whatsapp", PHONE, version=CURRENT), soon())
    assert _form(twilio.exchanges[-1])["From"] == "whatsapp:+15005550006"
    service = "MG" + "0123456789abcdef" * 2
    whatsapp_channel(twilio, sender=service).send(render("whatsapp", PHONE, version=CURRENT), soon())
    form = _form(twilio.exchanges[-1])
    assert form["MessagingServiceSid"] == service and "From" not in form


def test_a_language_without_a_template_fails_that_message_only_and_sends_nothing(twilio):
    before = twilio.requests
    only_en = {"en": whatsapp_contents()["en"]}
    result = whatsapp_channel(twilio, contents=only_en).send(
        render("whatsapp", PHONE, version=CURRENT, locale="ja"), soon()
    )
    assert result.outcome == "failed" and result.verdict.category is Category.SENDER_MISCONFIGURED
    assert result.verdict.scope is Scope.MESSAGE and not result.stops_channel and not result.verdict.suppresses
    assert twilio.requests == before


@pytest.mark.parametrize("code", sorted(table.ERRORS))
def test_every_whatsapp_error_code_at_submission(twilio, code):
    message = render("whatsapp", PHONE, version=CURRENT)
    twilio.script(FakeTwilio.error(400, code, f"Twilio error {code} about {PHONE}: code {message.secret}"))
    result = whatsapp_channel(twilio).send(message, soon())
    rule = table.ERRORS[code]
    assert result.outcome == "failed" and result.verdict == Verdict.of(rule, "twilio", str(code))
    assert result.stops_channel == (rule.scope is Scope.ACCOUNT)
    assert result.verdict.suppresses == (rule.fault is Fault.RECIPIENT)
    assert PHONE not in result.detail and message.secret not in result.detail


def test_the_sms_tables_codes_mean_the_same_on_whatsapp_and_unlisted_ones_blame_nobody():
    assert table.verdict(20003) == Verdict.of(sms_table.ERRORS[20003], "twilio", 20003)
    assert table.verdict(63038).holds_channel  # the account's daily limit
    unknown = table.verdict(63999)
    assert unknown.final and unknown.fault is Fault.TRANSIENT_OR_UNKNOWN and not unknown.holds_channel
    assert table.verdict(None).category is Category.UNKNOWN


def test_the_scopes_of_the_whatsapp_rows():
    assert table.ERRORS[63003].fault is Fault.RECIPIENT  # a number without WhatsApp: suppressed
    assert table.ERRORS[63015].scope is Scope.ROUTE  # the sandbox's recipients that have not joined
    assert table.ERRORS[63027].scope is Scope.MESSAGE  # one language's template: the others still go
    for code in (63001, 63007, 63016, 63028, 63112):
        assert table.ERRORS[code].holds_channel, code
    assert not set(table.ERRORS) & set(sms_table.ERRORS)  # one meaning per code


def test_the_content_never_shows_the_code_or_the_number():
    message = render("whatsapp", PHONE, version=CURRENT)
    shown = repr(message) + str(message)
    assert message.secret not in shown and PHONE not in shown and "***" in shown


def _callback(code: str, **fields: str) -> dict[str, str]:
    sid = "SM" + "1" * 32
    return {"MessageSid": sid, "MessageStatus": "undelivered", "ErrorCode": code, **fields}


def test_a_whatsapp_status_callback_is_classified_by_the_whatsapp_table():
    from signup_verification.delivery import reports

    by_address = reports.twilio_observation(_callback("63003", To=f"whatsapp:{PHONE}"))
    by_prefix = reports.twilio_observation(_callback("63016", ChannelPrefix="whatsapp", To=PHONE))
    as_sms = reports.twilio_observation(_callback("63003", To=PHONE))
    assert (by_address.fault, by_address.category, by_address.scope) == ("recipient", "invalid_destination", "message")
    assert (by_prefix.fault, by_prefix.scope) == ("sender_or_account", "account")
    assert (as_sms.fault, as_sms.category) == ("transient_or_unknown", "unknown")  # an SMS never meets 63003
    shared = reports.twilio_observation(_callback("30003", To=f"whatsapp:{PHONE}"))
    assert shared.category == "unreachable"  # the Messages API's codes mean what the SMS table says
