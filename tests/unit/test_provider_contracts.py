"""Contract tests against the providers' own OpenAPI specifications: every request
our Twilio and SendGrid adapters send, captured at the fake servers as it arrived on the wire, is
validated against Twilio's API v2010 spec and SendGrid's v3 spec with openapi-core; the fakes'
own answers are validated against the specs' response schemas, so a fake cannot drift into
answering what the real API never would.

The specs live in the team's reference folder beside the repository (../shared/specs, see its
README). Absent, these tests skip with the reason, except under CI=true, where they fail. Each
spec is loaded once per session and cut down to the one operation used (with the components it
references): the full documents are 1.9 and 2.6 MB.
"""

from __future__ import annotations

import copy
import json
import time
from datetime import UTC, datetime, timedelta

import pytest
import urllib3

from signup_verification.delivery import templates
from signup_verification.delivery.channels.http import HttpClient
from signup_verification.delivery.channels.sendgrid import SendGridChannel
from signup_verification.delivery.channels.twilio import TwilioChannel
from signup_verification.delivery.channels.twilio_voice import TwilioVoiceChannel
from signup_verification.delivery.channels.twilio_whatsapp import TwilioWhatsAppChannel
from signup_verification.delivery.config import MessageConfig
from signup_verification.delivery.messages import Renderer, sample_intent
from signup_verification.outbox.transitions import BegunAttempt
from signup_verification.verifications.tokens import Keyring
from support.fakes.http import Answer, Exchange, FakeSendGrid
from support.fakes.twilio import FakeTwilio, whatsapp_contents
from support.paths import TEST_TOKEN_KEYS
from support.provider_specs import (
    TWILIO_CALLS,
    TWILIO_MESSAGES,
    Contract,
    as_request,
    as_response,
    operation_spec,
    spec_file,
    twilio_contract,
)

KEYRING = Keyring.parse(TEST_TOKEN_KEYS)
SENDGRID_SEND = "/mail/send"
ALL = [
    (f"{purpose}/{version}", locale)
    for purpose in templates.purposes()
    for version in templates.versions(purpose)
    for locale in templates.locales(f"{purpose}/{version}")
]
SENDERS = ["Signup <no-reply@example.org>", "no-reply@example.org", "Ünïcode Näme <no-reply@example.org>"]


def _nullable_as_31(node) -> None:
    """OpenAPI 3.0's `nullable: true` written into a 3.1 document, where validators ignore it: as 3.1 says it."""
    if isinstance(node, dict):
        if node.pop("nullable", False) is True and isinstance(node.get("type"), str):
            node["type"] = [node["type"], "null"]
        for value in node.values():
            _nullable_as_31(value)
    elif isinstance(node, list):
        for value in node:
            _nullable_as_31(value)


def patch_sendgrid(spec: dict) -> dict:
    """Two defects of SendGrid's spec, patched here (never in shared/specs): the top-level custom_args
    is typed string, the API takes an object of strings (shared/specs/README.md); and the 3.1 export
    keeps 3.0's `nullable` (e.g. an error's `"field": null`, which the API sends on a 401)."""
    patched = copy.deepcopy(spec)
    body = patched["paths"][SENDGRID_SEND]["post"]["requestBody"]["content"]["application/json"]["schema"]
    body["properties"]["custom_args"] = {"type": "object", "additionalProperties": {"type": "string"}}
    _nullable_as_31(patched)
    return patched


@pytest.fixture(scope="session")
def twilio_spec() -> Contract:
    return twilio_contract(TWILIO_MESSAGES)


@pytest.fixture(scope="session")
def twilio_calls_spec() -> Contract:
    return twilio_contract(TWILIO_CALLS)


@pytest.fixture(scope="session")
def sendgrid_raw() -> dict:
    spec = json.loads(spec_file("sendgrid_v3.json").read_text(encoding="utf-8"))
    return operation_spec(spec, SENDGRID_SEND, "post")


@pytest.fixture(scope="session")
def sendgrid_spec(sendgrid_raw) -> Contract:
    return Contract.of(patch_sendgrid(sendgrid_raw))


# -- the wire exchange as openapi-core sees it ---------------------------------------------------------


def render(channel: str, version_ref: str, locale: str, sender: str = SENDERS[0], intent_id: int = 1):
    destination = "ada@example.com" if channel == "email" else "+14155550100"
    intent = sample_intent(
        channel,
        version_ref,
        locale,
        destination=destination,
        key_id="test-k1",
        expires_at=datetime.now(UTC) + timedelta(minutes=10),
        intent_id=intent_id,
    )
    return Renderer(MessageConfig(email_from=sender), KEYRING).render(
        intent, BegunAttempt(intent_id, f"{intent_id}:1", 1)
    )


def soon() -> float:
    return time.monotonic() + 5


# -- our requests ------------------------------------------------------------------------------------------
def test_every_sendgrid_request_matches_sendgrids_spec(sendgrid_spec):
    with FakeSendGrid() as fake:
        channel = SendGridChannel(fake.api_key, fake.send_url, HttpClient(timeout=2))
        for n, ((version_ref, locale), sender) in enumerate((c, s) for c in ALL for s in SENDERS):
            assert channel.send(render("email", version_ref, locale, sender, n + 1), soon()).outcome == "accepted"
        fake.script(Answer(400, {"errors": [{"field": "from", "message": "invalid"}]}), Answer(500, None))
        channel.send(render("email", *ALL[0]), soon())  # requests answered with errors are ours too
        channel.send(render("email", *ALL[0]), soon())
        channel.close()
    server = sendgrid_spec.server(SENDGRID_SEND)
    assert len(fake.exchanges) == len(ALL) * len(SENDERS) + 2
    for exchange in fake.exchanges:
        sendgrid_spec.validate_request(as_request(exchange, server, "/v3"))


def test_every_twilio_request_matches_twilios_spec(twilio_spec):
    with FakeTwilio() as fake:
        for sender in ("+15005550006", "MG" + "0123456789abcdef" * 2):
            channel = TwilioChannel(fake.account_sid, fake.auth_token, sender, fake.url, HttpClient(timeout=2))
            for n, (version_ref, locale) in enumerate(ALL):
                assert channel.send(render("sms", version_ref, locale, intent_id=n + 1), soon()).outcome == "accepted"
            channel.close()
    server = twilio_spec.server(TWILIO_MESSAGES)
    assert len(fake.exchanges) == 2 * len(ALL)
    for exchange in fake.exchanges:
        twilio_spec.validate_request(as_request(exchange, server))


def test_every_whatsapp_request_matches_twilios_spec_and_the_fake_answers_as_it_describes(twilio_spec):
    current = [(v, locale) for v, locale in ALL if v == templates.current_version(v.split("/")[0])]
    with FakeTwilio() as fake:
        for sender in ("whatsapp:+15005550006", "+15005550006", "MG" + "0123456789abcdef" * 2):
            channel = TwilioWhatsAppChannel(
                fake.account_sid, fake.auth_token, sender, fake.url, HttpClient(timeout=2), whatsapp_contents()
            )
            for n, (version_ref, locale) in enumerate(current):
                message = render("whatsapp", version_ref, locale, intent_id=n + 1)
                assert channel.send(message, soon()).outcome == "accepted"
                assert fake.deliveries[-1].body == message.text and message.secret in message.text
            channel.close()
    server = twilio_spec.server(TWILIO_MESSAGES)
    assert len(fake.exchanges) == 3 * len(current) and {e.status for e in fake.exchanges} == {201}
    for exchange in fake.exchanges:
        twilio_spec.validate_request(as_request(exchange, server))
        twilio_spec.validate_response(as_request(exchange, server), as_response(exchange))


def test_every_call_request_matches_twilios_spec_and_the_fake_answers_as_it_describes(twilio_calls_spec):
    current = [(v, locale) for v, locale in ALL if v == templates.current_version(v.split("/")[0])]
    with FakeTwilio() as fake:
        for callback in (None, "https://verify.example.org/twilio"):
            channel = TwilioVoiceChannel(
                fake.account_sid, fake.auth_token, "+15005550006", fake.url, HttpClient(timeout=2), callback
            )
            for n, (version_ref, locale) in enumerate(current):
                message = render("voice", version_ref, locale, intent_id=n + 1)
                assert channel.send(message, soon()).outcome == "accepted"
                assert fake.deliveries[-1].body == message.speech  # what the fake's call says
            channel.close()
    server = twilio_calls_spec.server(TWILIO_CALLS)
    assert len(fake.exchanges) == 2 * len(current) and {e.status for e in fake.exchanges} == {201}
    for exchange in fake.exchanges:
        twilio_calls_spec.validate_request(as_request(exchange, server))
        twilio_calls_spec.validate_response(as_request(exchange, server), as_response(exchange))
    without_to = b"&".join(p for p in fake.exchanges[0].body.split(b"&") if not p.startswith(b"To="))
    with pytest.raises(Exception, match="'To' is a required property"):  # not vacuous
        bad = fake.exchanges[0]
        twilio_calls_spec.validate_request(as_request(Exchange(bad.method, bad.path, bad.headers, without_to), server))


def test_the_validators_refuse_a_request_the_apis_would_refuse(sendgrid_spec, twilio_spec, sendgrid_raw):
    """Not vacuous: a request missing what each spec requires fails validation."""
    with FakeSendGrid() as sendgrid, FakeTwilio() as twilio:
        SendGridChannel(sendgrid.api_key, sendgrid.send_url, HttpClient(timeout=2)).send(
            render("email", *ALL[0]), soon()
        )
        TwilioChannel(twilio.account_sid, twilio.auth_token, "+15005550006", twilio.url, HttpClient(timeout=2)).send(
            render("sms", *ALL[0]), soon()
        )
    [mail], [sms] = sendgrid.exchanges, twilio.exchanges
    no_from = json.loads(mail.body)
    del no_from["from"]
    with pytest.raises(Exception, match="'from' is a required property"):
        sendgrid_spec.validate_request(
            as_request(
                Exchange(mail.method, mail.path, mail.headers, json.dumps(no_from).encode()),
                sendgrid_spec.server(SENDGRID_SEND),
                "/v3",
            )
        )
    no_to = b"&".join(p for p in sms.body.split(b"&") if not p.startswith(b"To="))
    with pytest.raises(Exception, match="'To' is a required property"):
        twilio_spec.validate_request(
            as_request(Exchange(sms.method, sms.path, sms.headers, no_to), twilio_spec.server(TWILIO_MESSAGES))
        )
    # The known spec bug the patch works around (shared/specs/README.md): still there, still needed.
    with pytest.raises(Exception, match="'attempt_id': '1:1'} is not of type 'string'"):
        Contract.from_dict(sendgrid_raw).validate_request(as_request(mail, sendgrid_spec.server(SENDGRID_SEND), "/v3"))


# -- the fakes' answers ---------------------------------------------------------------------------------------
def _post(url: str, body: bytes, headers: dict[str, str]) -> None:
    urllib3.PoolManager(retries=False).request("POST", url, body=body, headers=headers, timeout=2)


def test_the_fake_sendgrid_answers_as_sendgrids_spec_describes(sendgrid_spec):
    described = sendgrid_spec.statuses(SENDGRID_SEND)
    with FakeSendGrid() as fake:
        payload = SendGridChannel(fake.api_key, fake.send_url, HttpClient(timeout=2)).payload(render("email", *ALL[0]))
        good = {
            "Authorization": f"Bearer {fake.api_key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        }
        _post(fake.send_url, payload, good)  # 202
        _post(fake.send_url, payload, {**good, "Authorization": "Bearer SG.wrong"})  # 401
        _post(fake.send_url, b'{"personalizations": []}', good)  # 400
        _post(fake.url + "/v3/mail/sent", payload, good)  # 404
    statuses = [e.status for e in fake.exchanges]
    assert statuses == [202, 401, 400, 404] and set(statuses) <= described
    server = sendgrid_spec.server(SENDGRID_SEND)
    for exchange in fake.exchanges[:3]:  # the 404 went to a path the spec does not have
        sendgrid_spec.validate_response(as_request(exchange, server, "/v3"), as_response(exchange))
    assert fake.exchanges[0].response_headers["X-Message-Id"]


def test_the_fake_twilio_answers_as_twilios_spec_describes(twilio_spec):
    with FakeTwilio() as fake:
        for sender in ("+15005550006", "MG" + "0123456789abcdef" * 2):
            TwilioChannel(fake.account_sid, fake.auth_token, sender, fake.url, HttpClient(timeout=2)).send(
                render("sms", *ALL[0]), soon()
            )
    server = twilio_spec.server(TWILIO_MESSAGES)
    assert [e.status for e in fake.exchanges] == [201, 201]  # the spec describes only the 201 of Messages create
    for exchange in fake.exchanges:
        twilio_spec.validate_response(as_request(exchange, server), as_response(exchange))


def test_ending_a_call_matches_twilios_spec_and_the_fake_answers_as_it_describes():
    """The report path's hang-up (delivery/call_control.py): Calls update with `Status=completed`."""
    import os

    from signup_verification.delivery.call_control import end_call
    from support.paths import ROOT

    spec_path = ROOT.parent / "shared" / "specs" / "twilio_api_v2010.json"
    if not spec_path.is_file():  # as every contract test here: required under CI
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)(f"provider spec {spec_path} is absent")
    spec = json.loads(spec_path.read_text(encoding="utf-8"))
    path = "/2010-04-01/Accounts/{AccountSid}/Calls/{Sid}.json"
    contract = Contract.of(operation_spec(spec, path, "post"))
    with FakeTwilio() as fake:
        sid = "CA" + "0123456789abcdef" * 2
        fake.placed(sid)["status"] = "in-progress"
        ended = end_call(fake.account_sid, fake.auth_token, fake.url, sid)
        again = end_call(fake.account_sid, fake.auth_token, fake.url, sid)  # over already: 21220
    assert (ended.over, ended.detail, again.over, again.detail) == (True, "ended", True, "already over")
    server = contract.server(path)
    assert [e.status for e in fake.exchanges] == [200, 400]
    contract.validate_request(as_request(fake.exchanges[0], server))
    contract.validate_response(as_request(fake.exchanges[0], server), as_response(fake.exchanges[0]))
