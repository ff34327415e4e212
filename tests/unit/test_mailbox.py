"""The local mailbox: a real SMTP server, a fake Twilio API answering like Twilio, and the web page."""

from __future__ import annotations

import smtplib
import socket
import threading
import time
from email.message import EmailMessage

import pytest
import requests

from signup_verification.local.mailbox import MailboxServer, linkify, sms_segments

SID, AUTH = "AC" + "1" * 32, "secret-token"


def _free_ports(n: int) -> list[int]:
    """n distinct free ports: each socket stays bound until all are chosen, so none repeats."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@pytest.fixture
def server():
    runs: list[int] = []
    smtp_port, web_port = _free_ports(2)
    box = MailboxServer(
        "127.0.0.1",
        smtp_port,
        web_port,
        twilio_account_sid=SID,
        twilio_auth_token=AUTH,
        on_run_now=lambda: runs.append(1),
    )
    box.runs = runs
    with box:
        yield box


def _send_email(server: MailboxServer, to: str = "ada@example.com") -> None:
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "Signup <no-reply@localhost>", to, "Confirm <your> email"
    message.set_content("Open http://localhost:8082/?token=abc_DEF-1 to confirm.\n")
    message.add_alternative(
        '<html><head></head><body><a href="http://localhost:8082/?token=abc_DEF-1">'
        "Confirm email address</a><script>alert(1)</script></body></html>",
        subtype="html",
    )
    with smtplib.SMTP(server.host, server.smtp_port, timeout=10) as smtp:
        smtp.send_message(message)


def _sms(server: MailboxServer, auth=(SID, AUTH), sid: str = SID, **fields):
    data = {"To": "+14155550100", "From": "+15005550006", "Body": "Your code is 123456", **fields}
    return requests.post(f"{server.web_url}/2010-04-01/Accounts/{sid}/Messages.json", data=data, auth=auth, timeout=10)


def test_smtp_message_is_stored_and_shown_with_clickable_links(server):
    _send_email(server)
    [stored] = requests.get(f"{server.web_url}/api/messages", timeout=10).json()
    assert stored["kind"] == "email" and stored["to"] == ["ada@example.com"]
    assert stored["subject"] == "Confirm <your> email" and stored["links"] == ["http://localhost:8082/?token=abc_DEF-1"]

    listing = requests.get(f"{server.web_url}/", timeout=10).text
    assert "ada@example.com" in listing and "Confirm &lt;your&gt; email" in listing
    assert f'href="/messages/{stored["id"]}"' in listing

    page = requests.get(f"{server.web_url}/messages/{stored['id']}", timeout=10)
    assert page.status_code == 200
    assert '<a href="http://localhost:8082/?token=abc_DEF-1">' in page.text
    assert f'<iframe src="/messages/{stored["id"]}/html"' in page.text and "sandbox=" in page.text

    framed = requests.get(f"{server.web_url}/messages/{stored['id']}/html", timeout=10)
    assert '<base target="_top">' in framed.text
    assert "script-src" not in framed.headers["Content-Security-Policy"]  # default-src 'none': no scripts
    assert (
        "Subject: Confirm <your> email"
        in requests.get(f"{server.web_url}/messages/{stored['id']}/raw", timeout=10).text
    )


def test_twilio_create_answers_like_twilio_and_stores_the_sms(server):
    response = _sms(server)
    assert response.status_code == 201
    body = response.json()
    assert body["sid"].startswith("SM") and len(body["sid"]) == 34
    assert body["to"] == "+14155550100" and body["from"] == "+15005550006" and body["status"] == "queued"
    assert body["num_segments"] == "1" and body["account_sid"] == SID
    [stored] = requests.get(f"{server.web_url}/api/messages", timeout=10).json()
    assert stored["kind"] == "sms" and stored["text"] == "Your code is 123456" and stored["sid"] == body["sid"]
    fetched = requests.get(f"{server.web_url}{body['uri']}", auth=(SID, AUTH), timeout=10)
    assert fetched.status_code == 200 and fetched.json()["sid"] == body["sid"]
    page = requests.get(f"{server.web_url}/messages/{stored['id']}", timeout=10).text
    assert "Your code is 123456" in page and "+14155550100" in page


@pytest.mark.parametrize(
    "fields, auth, status, code",
    [
        ({}, ("ACwrong", AUTH), 401, 20003),
        ({}, (SID, "wrong"), 401, 20003),
        ({}, None, 401, 20003),
        ({"To": ""}, (SID, AUTH), 400, 21604),
        ({"From": ""}, (SID, AUTH), 400, 21603),
        ({"Body": ""}, (SID, AUTH), 400, 21602),
        ({"Body": "x" * 1601}, (SID, AUTH), 400, 21617),
        ({"To": "4155550100"}, (SID, AUTH), 400, 21211),
        ({"To": "+15005550001"}, (SID, AUTH), 400, 21211),  # Twilio's test number: invalid
        ({"To": "+15005550004"}, (SID, AUTH), 400, 21610),  # Twilio's test number: unsubscribed (STOP)
        ({"To": "+15005550009"}, (SID, AUTH), 400, 21614),  # Twilio's test number: not a mobile
    ],
)
def test_twilio_errors_use_twilio_codes_and_store_nothing(server, fields, auth, status, code):
    response = _sms(server, auth=auth, **fields)
    assert response.status_code == status
    assert response.json()["code"] == code and response.json()["status"] == status
    assert requests.get(f"{server.web_url}/api/messages", timeout=10).json() == []


def test_list_is_newest_first_and_clear_empties_it(server):
    _send_email(server, "first@example.com")
    _sms(server, To="+14155550199")
    listing = requests.get(f"{server.web_url}/", timeout=10).text
    assert listing.index("+14155550199") < listing.index("first@example.com")
    assert requests.post(f"{server.web_url}/clear", timeout=10).status_code == 200  # 303 -> the empty list
    assert "No messages yet" in requests.get(f"{server.web_url}/", timeout=10).text


def test_run_now_button_triggers_the_scheduler(server):
    assert 'action="/scheduler/run"' in requests.get(f"{server.web_url}/", timeout=10).text
    requests.post(f"{server.web_url}/scheduler/run", timeout=10)
    assert server.runs == [1]


def test_wait_for_returns_when_the_message_arrives(server):
    threading.Timer(0.2, _sms, args=(server,)).start()
    found = server.mailbox.wait_for(lambda m: m.kind == "sms", timeout=10)
    assert found is not None and found.recipients == ["+14155550100"]
    assert server.mailbox.wait_for(lambda m: m.kind == "email", timeout=0.1) is None


def test_linkify_escapes_everything_but_the_links():
    html = str(linkify('<b>hi</b> http://x.test/?a=1&b=2 "q"'))
    assert html.startswith("&lt;b&gt;hi&lt;/b&gt; ")
    assert '<a href="http://x.test/?a=1&amp;b=2">http://x.test/?a=1&amp;b=2</a>' in html


def test_sms_segments():
    assert sms_segments("a" * 160) == 1 and sms_segments("a" * 161) == 2
    assert sms_segments("ê" * 70) == 1 and sms_segments("ê" * 71) == 2  # ê is not in GSM-7 (é is)


def test_the_code_to_copy_is_the_written_or_spoken_code_never_a_port():
    from datetime import UTC, datetime

    from signup_verification.local.mailstore import Message

    def code(kind: str, text: str) -> str | None:
        return Message(1, kind, datetime.now(UTC), "+15005550006", ["+14155550100"], "", text).code

    assert code("sms", "Shop: 042917 is your code. Expires in 10 min.\n\n@localhost:20001 #042917") == "042917"
    assert code("sms", "Open http://localhost:20001/c to enter 12345678") == "12345678"
    assert code("whatsapp", "042917 is your verification code.") == "042917"
    assert code("voice", "Your code is: 0, 4, 2, 9, 1, 7. Once again: 0, 4, 2, 9, 1, 7. It expires in 10 minutes.") == (
        "042917"
    )
    assert code("sms", "no code here, 123") is None and code("email", "code 042917") is None


def test_time_elements_carry_valid_html_datetimes(server):
    """HTML's global date-and-time string allows at most 3 fractional digits (not Python's 6)."""
    import re

    _send_email(server)
    page = requests.get(server.web_url + "/", timeout=5).text
    [value] = re.findall(r'<time datetime="([^"]+)"', page)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,3})?(Z|[+-]\d\d:\d\d)", value), value


def _luminance(hex_colour: str) -> float:
    if len(hex_colour) == 4:  # #fff
        hex_colour = "#" + "".join(c * 2 for c in hex_colour[1:])
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _contrast(a: str, b: str) -> float:
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_the_badges_meet_wcag_aa_contrast_in_both_schemes():
    """WCAG 1.4.3 (axe `color-contrast`): 4.5:1 for the badges' small bold text, light and dark."""
    import re
    from pathlib import Path

    from signup_verification.local import mailbox

    css = (Path(mailbox.__file__).parent / "templates" / "layout.html").read_text()
    light = dict(
        re.findall(r"--([\w-]+):(#[0-9a-f]{6}|#[0-9a-f]{3})", css.split("@media (prefers-color-scheme:dark)")[0])
    )
    dark = {
        **light,
        **dict(
            re.findall(
                r"--([\w-]+):(#[0-9a-f]{6}|#[0-9a-f]{3})",
                css.split("@media (prefers-color-scheme:dark)")[1].split("}}")[0],
            )
        ),
    }
    assert "color:var(--on-badge)" in css
    for scheme in (light, dark):
        for background in ("accent", "sms", "whatsapp", "voice"):
            assert _contrast(scheme["on-badge"], scheme[background]) >= 4.5, (scheme, background)


def test_the_smtp_reply_carries_a_queue_id_as_postfix_does(server):
    """The dispatcher keeps the queue id of the 250 reply as the provider reference (what
    `verifyctl inspect` shows): the mailbox answers like Postfix, and shows the same id."""
    from signup_verification.delivery.channels.smtp import provider_reference

    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "a@localhost", "ada@example.com", "hi"
    message.set_content("hello\n")
    with smtplib.SMTP(server.host, server.smtp_port, timeout=10) as client:
        client.ehlo()
        client.mail("a@localhost")
        client.rcpt("ada@example.com")
        code, reply = client.data(message.as_bytes())
    [stored] = server.mailbox.messages()
    assert code == 250 and reply == f"2.0.0 Ok: queued as {stored.sid}".encode()
    assert provider_reference(reply) == stored.sid
    assert (
        f"<dt>Queue id</dt><dd>{stored.sid}</dd>"
        in requests.get(f"{server.web_url}/messages/{stored.id}", timeout=10).text
    )


def test_whatsapp_messages_and_calls_from_our_adapters_are_shown_as_the_person_gets_them(server):
    """`verifyctl dev`'s fake Twilio takes what the WhatsApp and voice adapters send: the template
    message rendered from its content SID and variable, the call as what its TwiML says."""
    from datetime import UTC, datetime, timedelta

    from signup_verification.delivery import templates
    from signup_verification.delivery.channels.http import HttpClient
    from signup_verification.delivery.channels.twilio_voice import TwilioVoiceChannel
    from signup_verification.delivery.channels.twilio_whatsapp import TwilioWhatsAppChannel
    from signup_verification.delivery.config import MessageConfig
    from signup_verification.delivery.messages import Renderer, sample_intent
    from signup_verification.local import fake_twilio
    from signup_verification.outbox.transitions import BegunAttempt
    from signup_verification.verifications.tokens import Keyring
    from support.paths import TEST_TOKEN_KEYS

    version = templates.current_version("signup")
    renderer = Renderer(MessageConfig(), Keyring.parse(TEST_TOKEN_KEYS))

    def rendered(channel: str):
        expires = datetime.now(UTC) + timedelta(minutes=10)
        intent = sample_intent(channel, version, "ja", destination="+14155550100", key_id="test-k1", expires_at=expires)
        return renderer.render(intent, BegunAttempt(1, "1:1", 1))

    whatsapp = TwilioWhatsAppChannel(
        SID, AUTH, "whatsapp:+15005550006", server.web_url, HttpClient(timeout=5), fake_twilio.content_sids()
    )
    voice = TwilioVoiceChannel(SID, AUTH, "+15005550006", server.web_url, HttpClient(timeout=5))
    message, call = rendered("whatsapp"), rendered("voice")
    assert whatsapp.send(message, time.monotonic() + 5).outcome == "accepted"
    assert voice.send(call, time.monotonic() + 5).outcome == "accepted"
    shown_call, shown_message = requests.get(f"{server.web_url}/api/messages", timeout=10).json()
    assert (shown_message["kind"], shown_message["text"]) == ("whatsapp", message.text)
    assert message.secret in shown_message["text"] and shown_message["to"] == ["+14155550100"]
    assert (shown_call["kind"], shown_call["text"]) == ("voice", call.speech) and shown_call["sid"].startswith("CA")
    inbox = requests.get(server.web_url, timeout=10).text
    assert "WhatsApp" in inbox and "Call" in inbox
    page = requests.get(f"{server.web_url}/messages/{shown_call['id']}", timeout=10).text
    assert "What the call says" in page and "Segments" not in page
    # the code to copy: the call's spoken digits joined, the message's as written
    assert (shown_call["code"], shown_message["code"]) == (call.secret, message.secret)
    assert f'<code id="code" class="code" title="one click selects it">{call.secret}</code>' in page
    assert 'class="kind whatsapp"' in inbox and 'class="kind voice"' in inbox
    # a WhatsApp message that is not an approved template is refused as Twilio refuses it
    free_form = {"To": "whatsapp:+14155550100", "From": "whatsapp:+15005550006", "Body": "hello"}
    refused = requests.post(
        f"{server.web_url}/2010-04-01/Accounts/{SID}/Messages.json", data=free_form, auth=(SID, AUTH)
    )
    assert refused.status_code == 400 and refused.json()["code"] == 63016
    whatsapp.close()
    voice.close()
