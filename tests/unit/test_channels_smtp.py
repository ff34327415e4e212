"""The SMTP adapter against a real SMTP server (aiosmtpd): every reply class, TLS, AUTH,
and the one ambiguous moment (after the message was sent, before the server's answer)."""

from __future__ import annotations

import select
import time
from datetime import UTC, datetime, timedelta

import pytest

from signup_verification.delivery.channels.smtp import SmtpChannel, classify_reply
from signup_verification.delivery.config import MessageConfig, SmtpConfig
from signup_verification.delivery.messages import Renderer, sample_intent
from signup_verification.outbox.transitions import BegunAttempt
from signup_verification.verifications.tokens import Keyring
from support.fakes.smtp import FakeSmtpServer, SmtpBehaviour, free_port
from support.fakes.tls import make_certificate
from support.paths import TEST_TOKEN_KEYS
from support.waiting import until

KEYRING = Keyring.parse(TEST_TOKEN_KEYS)
SETTINGS = MessageConfig(email_from="Signup <no-reply@example.org>")


def message(to="ada@example.com", intent_id=1):
    expires = datetime.now(UTC) + timedelta(minutes=10)
    intent = sample_intent(
        "email", "signup/v1", "en", destination=to, key_id="test-k1", expires_at=expires, intent_id=intent_id
    )
    return Renderer(SETTINGS, KEYRING).render(intent, BegunAttempt(intent_id, f"{intent_id}:1", 1))


def soon(seconds=5.0):
    return time.monotonic() + seconds


@pytest.fixture
def server():
    with FakeSmtpServer() as fake:
        yield fake


def channel_for(fake, **kwargs) -> SmtpChannel:
    return SmtpChannel(SmtpConfig(host=fake.host, port=fake.port, timeout=kwargs.pop("timeout", 2.0), **kwargs))


def test_accepted_message_arrives_whole(server):
    channel = channel_for(server)
    content = message()
    result = channel.send(content, soon())
    assert result.outcome == "accepted" and result.provider_ref == "4069127A001"  # the queue id, digits unmasked
    [got] = server.received
    assert got.mail_from == "no-reply@example.org" and got.rcpt_tos == ["ada@example.com"]
    parsed = got.message
    assert parsed["Message-ID"] == content.message_id and parsed["Auto-Submitted"] == "auto-generated"
    assert parsed["Content-Language"] == "en"  # the language the message is written in (RFC 3282)
    assert content.text.strip() in parsed.get_body(("plain",)).get_content().replace("\r\n", "\n")
    channel.close()


def test_connections_are_reused_and_a_dropped_idle_one_is_replaced():
    with FakeSmtpServer(idle_timeout=0.2) as fake:
        channel = channel_for(fake)
        assert channel.send(message(intent_id=1), soon()).outcome == "accepted"
        assert channel.send(message(intent_id=2), soon()).outcome == "accepted"
        assert len(channel._idle) == 1  # one connection served both
        [pooled] = channel._idle
        # the server closes the idle pooled connection (421 timeout): its socket turns readable
        until(lambda: select.select([pooled.sock], [], [], 0)[0], timeout=5, what="the server's 421")
        assert channel.send(message(intent_id=3), soon()).outcome == "accepted"
        assert [m.rcpt_tos for m in fake.received] == [["ada@example.com"]] * 3
        channel.close()


def test_a_leading_dot_line_survives_dot_stuffing(server):
    channel = channel_for(server)
    content = message()
    object.__setattr__(content, "text", "first\n.\n.hidden line\nlast\n")
    assert channel.send(content, soon()).outcome == "accepted"
    assert ".hidden line" in server.received[0].message.get_body(("plain",)).get_content()


@pytest.mark.parametrize(
    "reply,outcome,error_class",
    [
        ("550 5.1.1 <ada@example.com>: Recipient address rejected: User unknown", "failed", "bounced"),
        ("553 5.1.3 bad address syntax", "failed", "invalid_destination"),
        ("552 5.2.2 mailbox full", "failed", "mailbox_full"),
        # 5.7.x at RCPT is policy towards the receiving domain (a route), whatever its words: a relay may
        # quote an outsider's server there, so phrases never make it a fault of our account
        ("554 5.7.1 Relay access denied", "failed", "blocked"),
        ("450 4.2.1 mailbox busy, try later", "retryable", "smtp_transient"),
        # Postfix's smtpd_delay_reject=yes: refusals of our sender arrive at RCPT; their enhanced code says so
        ("550 5.1.8 <no-reply@example.org>: Sender address rejected: Domain not found", "failed", "configuration"),
        (
            "553 5.1.7 <no-reply@example.org>: Sender address rejected: bad sender mailbox syntax",
            "failed",
            "configuration",
        ),
        ("554 5.7.1 <no-reply@example.org>: Sender address rejected: Access denied", "failed", "blocked"),
        ("504 5.5.2 <localhost>: Helo command rejected: need fully-qualified hostname", "failed", "unknown"),
        ("554 5.7.1 <unknown[192.0.2.1]>: Client host rejected: Access denied", "failed", "blocked"),
        ("554 5.7.1 <ada@example.com>: Recipient address rejected: Access denied", "failed", "blocked"),
        # a relay verifying the recipient quotes the remote server: its words are the outsider's
        (
            "550 5.1.1 <ada@example.com>: Recipient address rejected: undeliverable address: host "
            "mx.example.com[192.0.2.7] said: 550 5.7.1 Sender address rejected: relay denied",
            "failed",
            "bounced",
        ),
        (
            "550 5.7.8 <ada@example.com>: Recipient address rejected: host mx.example.com[192.0.2.7] said: "
            "535 5.7.8 authentication credentials invalid",
            "failed",
            "sender_misconfigured",
        ),
        ("452 4.5.3 too many recipients", "retryable", "smtp_transient"),
    ],
)
def test_rcpt_replies(server, reply, outcome, error_class):
    server.behaviour = SmtpBehaviour(rcpt_reply=lambda address: reply)
    result = channel_for(server).send(message(), soon())
    assert (result.outcome, result.error_class) == (outcome, error_class)
    assert "ada@example.com" not in result.detail  # providers echo the recipient; we never store it
    assert server.received == []


@pytest.mark.parametrize(
    "reply,outcome,error_class",
    [
        ("451 4.3.0 local error, try again", "retryable", "smtp_transient"),
        ("421 4.3.2 shutting down", "retryable", "smtp_transient"),
        ("554 5.6.0 content rejected", "failed", "message_rejected"),
        ("552 5.3.4 message too big", "failed", "message_rejected"),
    ],
)
def test_data_replies(server, reply, outcome, error_class):
    server.behaviour = SmtpBehaviour(data_reply=reply)
    result = channel_for(server).send(message(), soon())
    assert (result.outcome, result.error_class) == (outcome, error_class)


@pytest.mark.parametrize(
    "greeting",
    ["554 5.7.1 mx.example.org ESMTP not accepting mail from you", "521 5.3.2 mx.example.org does not accept mail"],
)
def test_a_refusing_greeting_is_a_configuration_error(server, greeting):
    server.behaviour = SmtpBehaviour(greeting=greeting)
    result = channel_for(server).send(message(), soon())
    assert (result.outcome, result.error_class) == ("failed", "configuration")
    assert f"smtp {greeting[:3]}" in result.detail and "at connect" in result.detail and server.received == []


def test_a_refused_ehlo_is_reported_as_such(server):
    server.behaviour = SmtpBehaviour(
        ehlo_reply="504 5.5.2 <localhost>: Helo command rejected: need fully-qualified hostname"
    )
    result = channel_for(server).send(message(), soon())
    assert (result.outcome, result.error_class) == ("failed", "configuration")
    assert result.detail.startswith("smtp 504 5.5.2 at ehlo") and "Helo command rejected" in result.detail
    assert "503" not in result.detail and server.received == []


def test_a_transient_ehlo_refusal_is_retryable(server):
    server.behaviour = SmtpBehaviour(ehlo_reply="421 4.7.0 mx.example.org closing: too many connections")
    result = channel_for(server).send(message(), soon())
    assert (result.outcome, result.error_class) == ("retryable", "smtp_transient")


def test_refused_sender_is_a_configuration_error(server):
    server.behaviour = SmtpBehaviour(mail_reply="553 5.7.1 sender not owned by user")
    result = channel_for(server).send(message(), soon())
    assert (result.outcome, result.error_class) == ("failed", "configuration")


def test_no_answer_after_the_message_was_sent_is_ambiguous(server):
    server.behaviour = SmtpBehaviour(reply_delay=0.8)
    started = time.monotonic()
    result = channel_for(server, timeout=0.3).send(message(), soon())
    assert (result.outcome, result.error_class) == ("ambiguous", "no_reply_after_data")
    assert time.monotonic() - started < 0.7
    assert len(server.received) == 1  # the server did take it: exactly why it is ambiguous


def test_connection_dropped_after_the_server_took_the_message_is_ambiguous(server):
    server.behaviour = SmtpBehaviour(drop_after_data=True)
    result = channel_for(server).send(message(), soon())
    assert result.outcome == "ambiguous" and len(server.received) == 1


def test_the_deadline_bounds_the_wait_more_tightly_than_the_timeout(server):
    server.behaviour = SmtpBehaviour(reply_delay=0.8)
    started = time.monotonic()
    result = channel_for(server, timeout=10).send(message(), soon(0.3))
    assert result.outcome == "ambiguous" and time.monotonic() - started < 0.7


def test_no_time_left_means_not_sent(server):
    result = channel_for(server).send(message(), time.monotonic() - 1)
    assert (result.outcome, result.error_class) == ("retryable", "deadline") and server.received == []


def test_unreachable_server_is_retryable():
    result = SmtpChannel(SmtpConfig(host="127.0.0.1", port=free_port(), timeout=1)).send(message(), soon())
    assert (result.outcome, result.error_class) == ("retryable", "connect")


def test_auth_good_and_bad_credentials():
    with FakeSmtpServer(credentials=("mailer", "s3cret")) as fake:
        ok = channel_for(fake, username="mailer", password="s3cret").send(message(), soon())
        assert ok.outcome == "accepted"
        bad = channel_for(fake, username="mailer", password="wrong").send(message(), soon())
        assert (bad.outcome, bad.error_class) == ("failed", "configuration") and "535" in bad.detail
        assert "wrong" not in bad.detail and len(fake.received) == 1


def test_auth_without_server_support_is_a_configuration_error(server):
    result = channel_for(server, username="mailer", password="x").send(message(), soon())
    assert (result.outcome, result.error_class) == ("failed", "configuration")


def test_starttls_with_a_trusted_certificate(tmp_path):
    cert = make_certificate(tmp_path)
    with FakeSmtpServer(starttls=cert.server_context(), credentials=("mailer", "pw")) as fake:
        channel = channel_for(
            fake, security="starttls", ssl_context=cert.client_context(), username="mailer", password="pw"
        )
        assert channel.send(message(), soon()).outcome == "accepted"
        untrusted = channel_for(fake, security="starttls")  # the system trust store does not know it
        result = untrusted.send(message(), soon())
        assert (result.outcome, result.error_class) == ("failed", "configuration") and "certificate" in result.detail


def test_starttls_required_but_not_offered(server):
    result = channel_for(server, security="starttls").send(message(), soon())
    assert (result.outcome, result.error_class) == ("failed", "configuration")


def test_implicit_tls(tmp_path):
    cert = make_certificate(tmp_path)
    with FakeSmtpServer(implicit_tls=cert.server_context()) as fake:
        result = channel_for(fake, security="tls", ssl_context=cert.client_context()).send(message(), soon())
        assert result.outcome == "accepted" and len(fake.received) == 1


def test_non_ascii_address_needs_smtputf8():
    with FakeSmtpServer(smtputf8=True) as fake:
        assert channel_for(fake).send(message(to="josé@example.com"), soon()).outcome == "accepted"
        assert fake.received[0].rcpt_tos == ["josé@example.com"]
    with FakeSmtpServer(smtputf8=False) as fake:
        result = channel_for(fake).send(message(to="josé@example.com"), soon())
        # the address is valid; our relay cannot carry it: the message fails, the address is not blamed
        assert (result.outcome, result.error_class) == ("failed", "message_rejected")
        assert result.verdict is not None and result.verdict.fault == "sender_or_account"


def test_classify_reply_table():
    assert classify_reply("auth", 535, b"5.7.8 Authentication credentials invalid").error_class == "configuration"
    assert classify_reply("end", 250 + 300, b"5.7.1 spam").outcome == "failed"
    assert classify_reply("rcpt", 550, b"no such user").error_class == "bounced"
