"""Every row of every provider's table, synchronously: the adapter meets the refusal from a local
server speaking the provider's protocol, and its result carries exactly the row's verdict (final,
whose fault, which reason, its scope), the label settle records, and whether the channel stops for
the invocation (only an account fault stops it)."""

from __future__ import annotations

import pytest

from signup_verification.delivery.channels.base import CONFIGURATION
from signup_verification.delivery.channels.smtp import SmtpChannel
from signup_verification.delivery.classification import Category, Fault, Rule, Scope, Verdict
from signup_verification.delivery.classification import sendgrid as sendgrid_table
from signup_verification.delivery.classification import smtp as smtp_table
from signup_verification.delivery.classification import twilio as twilio_table
from signup_verification.delivery.config import SmtpConfig
from support.channels import PHONE, render, sendgrid_channel, soon, twilio_channel
from support.fakes.http import Answer, FakeSendGrid
from support.fakes.smtp import FakeSmtpServer, SmtpBehaviour
from support.fakes.twilio import FakeTwilio


def expect(result, rule: Rule, provider: str, code: str) -> None:
    assert result.outcome == "failed"
    assert result.verdict == Verdict.of(rule, provider, code)
    label = (
        CONFIGURATION
        if rule.scope is Scope.ACCOUNT and rule.category is Category.SENDER_MISCONFIGURED
        else rule.category
    )
    assert result.error_class == label
    assert result.stops_channel == (rule.scope is Scope.ACCOUNT)  # a route or message fault stops nothing else
    assert result.verdict.suppresses == (rule.fault is Fault.RECIPIENT)


@pytest.fixture(scope="module")
def twilio():
    with FakeTwilio() as fake:
        yield fake


@pytest.mark.parametrize("code", sorted(twilio_table.ERRORS))
def test_every_twilio_error_code_at_submission(twilio, code):
    twilio.script(FakeTwilio.error(400, code, f"Twilio error {code} about {PHONE}"))
    result = twilio_channel(twilio).send(render("sms", PHONE), soon())
    rule = twilio_table.ERRORS[code]
    if rule.final:
        expect(result, rule, "twilio", str(code))
    else:  # 21611: the sender's queue is full; never created: retried later, the channel slowed down
        assert (result.outcome, result.error_class, result.verdict) == ("retryable", "rate_limited", None)
        assert not result.stops_channel
    assert PHONE not in result.detail


def test_an_unlisted_twilio_refusal_is_final_and_blames_nobody(twilio):
    twilio.script(FakeTwilio.error(400, 21999, "something new"))
    result = twilio_channel(twilio).send(render("sms", PHONE), soon())
    expect(result, twilio_table.UNKNOWN, "twilio", "21999")


def test_destination_scoped_twilio_refusals_hold_no_channel():
    """The codes an outsider can provoke by choosing destinations are never account faults."""
    for code in (21606, 21659, 21612, 21408, 21608, 30007, 30032, 30034, 30023, 30024, 30450):
        assert twilio_table.ERRORS[code].scope is Scope.ROUTE, code
    for code in (21612, 30004, 30006):
        assert twilio_table.ERRORS[code].fault is not Fault.RECIPIENT, code  # never suppresses a valid number


_SENDGRID_ANSWERS = {
    "400 personalizations": Answer(
        400, {"errors": [{"field": "personalizations.0.to.0.email", "message": "Does not contain a valid address."}]}
    ),
    "400 from": Answer(400, {"errors": [{"field": "from.email", "message": "The from email is not valid."}]}),
    "400": Answer(400, {"errors": [{"field": "content.0.value", "message": "invalid"}]}),
    "401": Answer(401, {"errors": [{"message": "The provided authorization grant is invalid"}]}),
    "403": Answer(403, {"errors": [{"message": "access forbidden"}]}),
    "404": Answer(404, {"errors": [{"message": "Not Found"}]}),
    "406": Answer(406, {"errors": [{"message": "Not Acceptable"}]}),
    "413": Answer(413, {"errors": [{"message": "too large"}]}),
    "415": Answer(415, {"errors": [{"message": "Unsupported Media Type"}]}),
    "451": Answer(451, {"errors": [{"message": "Unavailable due to data residency restrictions"}]}),
}


@pytest.fixture(scope="module")
def sendgrid():
    with FakeSendGrid() as fake:
        yield fake


@pytest.mark.parametrize("key", list(sendgrid_table.SUBMISSION))
def test_every_sendgrid_submission_refusal(sendgrid, key):
    assert set(_SENDGRID_ANSWERS) == set(sendgrid_table.SUBMISSION)  # every row has its answer here
    sendgrid.script(_SENDGRID_ANSWERS[key])
    result = sendgrid_channel(sendgrid).send(render("email", "ada@example.com"), soon())
    expect(result, sendgrid_table.SUBMISSION[key], "sendgrid", key.split()[0])


def test_sendgrid_configuration_answers_stop_the_channel(sendgrid):
    """404 (a wrong URL) and 451 (data residency) are our configuration, not one message's."""
    for status in ("404", "451"):
        sendgrid.script(_SENDGRID_ANSWERS[status])
        result = sendgrid_channel(sendgrid).send(render("email", "ada@example.com"), soon())
        assert (result.error_class, result.stops_channel) == (CONFIGURATION, True)


# An SMTP reply for each row, with the stage that answers it: RCPT unless the row is about the
# message (DATA) or the session.
_ADA = "ada@example.com"
_SMTP_REPLIES = [
    *[
        (code, f"550 {code} refused", "rcpt", rule)
        for code, rule in smtp_table.ENHANCED.items()
        if code not in ("5.2.3", "5.3.4")
    ],  # fmt: skip
    ("5.2.3", "552 5.2.3 message too long", "data", smtp_table.ENHANCED["5.2.3"]),
    ("5.3.4", "552 5.3.4 message too big for system", "data", smtp_table.ENHANCED["5.3.4"]),
    ("5.1.99", "550 5.1.99 unlisted addressing status", "rcpt", smtp_table.SUBJECTS["5.1"]),
    ("5.7.99", "550 5.7.99 unlisted policy status", "rcpt", smtp_table.SUBJECTS["5.7"]),
    ("5.7.1", "553 5.7.1 <no-reply@example.org>: Sender address rejected: not owned", "mail", smtp_table.REFUSES_US),
    ("554", "554 no SMTP service here", "connect", smtp_table.REFUSES_US),
    ("5.7.0", "530 5.7.0 Authentication required", "rcpt", smtp_table.AUTHENTICATION_REQUIRED),
    ("550", "550 no such user here", "rcpt", smtp_table.NO_SUCH_MAILBOX),
    ("554", "554 Transaction failed: content refused", "data", smtp_table.MESSAGE_REFUSED),
    ("554", "554 go away", "rcpt", smtp_table.OTHER),
]


def _behaviour(stage: str, reply: str) -> SmtpBehaviour:
    return {
        "rcpt": lambda: SmtpBehaviour(rcpt_reply=lambda address: reply),
        "data": lambda: SmtpBehaviour(data_reply=reply),
        "mail": lambda: SmtpBehaviour(mail_reply=reply),
        "connect": lambda: SmtpBehaviour(greeting=reply),
    }[stage]()


def _smtp_send(behaviour: SmtpBehaviour, to: str = _ADA):
    with FakeSmtpServer() as fake:
        fake.behaviour = behaviour
        channel = SmtpChannel(SmtpConfig(host=fake.host, port=fake.port, timeout=2.0))
        try:
            return channel.send(render("email", to), soon())
        finally:
            channel.close()


@pytest.mark.parametrize(("code", "reply", "stage", "rule"), _SMTP_REPLIES, ids=[r[1][:40] for r in _SMTP_REPLIES])
def test_every_smtp_permanent_refusal(code, reply, stage, rule):
    result = _smtp_send(_behaviour(stage, reply))
    expect(result, rule, "smtp", code)
    assert _ADA not in result.detail


def test_every_row_of_each_table_is_exercised_here():
    smtp_rows = {r[3] for r in _SMTP_REPLIES}
    tables = [*smtp_table.ENHANCED.values(), *smtp_table.SUBJECTS.values(), smtp_table.REFUSES_US,
              smtp_table.AUTHENTICATION_REQUIRED, smtp_table.NO_SUCH_MAILBOX, smtp_table.MESSAGE_REFUSED,
              smtp_table.OTHER]  # fmt: skip
    assert all(rule in smtp_rows for rule in tables)


# A relay that verifies the recipient (Postfix reject_unverified_recipient, an Exim callout) passes the
# remote server's words on, and an outsider runs that server: none of these may speak for our account.
_ECHOES = [
    # the remote's phrase never overrides the relay's own enhanced code
    ("550 5.1.1 <ada@evil.example>: Recipient address rejected: undeliverable address: host mx.evil.example"
     "[192.0.2.7] said: 550 5.7.1 Sender address rejected: Relay access denied", "bounced", Scope.MESSAGE),
    ("550 5.7.1 <ada@evil.example>: Recipient address rejected: Client host rejected: Helo command rejected",
     "blocked", Scope.ROUTE),
    # an account code is the receiving domain's at most when the reply echoes the recipient or quotes a server
    ("550 5.7.8 <ada@evil.example>: authentication credentials invalid", "sender_misconfigured", Scope.ROUTE),
    ("535 5.7.8 Authentication credentials invalid (host mx.evil.example[192.0.2.7] said: 535 5.7.8)",
     "sender_misconfigured", Scope.ROUTE),
    ("553 5.1.8 Callout verification failed: 550 5.1.8 Sender address rejected", "sender_misconfigured", Scope.ROUTE),
    ("530 5.7.0 <ada@evil.example>: Authentication required", "sender_misconfigured", Scope.ROUTE),
]  # fmt: skip


@pytest.mark.parametrize(("reply", "label", "scope"), _ECHOES, ids=[e[0][:48] for e in _ECHOES])
@pytest.mark.parametrize("stage", ["rcpt", "data"])
def test_relay_echoes_of_an_outsiders_server_never_hold_the_channel(reply, label, scope, stage):
    result = _smtp_send(_behaviour(stage, reply), to="ada@evil.example")
    assert result.outcome == "failed" and result.verdict is not None
    assert (result.error_class, result.verdict.scope, result.stops_channel) == (label, scope, False)
    assert "ada@evil.example" not in result.detail


def test_an_exim_callout_quoting_the_remote_blames_the_address_at_most():
    """A multi-line reply whose first line has no enhanced code: a plain 550 at RCPT (that address only)."""
    reply = "550-Callout verification failed:\r\n550 550 5.7.8 Authentication credentials invalid"
    result = _smtp_send(_behaviour("rcpt", reply), to="ada@evil.example")
    assert (result.error_class, result.verdict.scope, result.stops_channel) == ("bounced", Scope.MESSAGE, False)


def test_our_sessions_own_refusals_still_stop_the_channel():
    """A refused login, a refused MAIL FROM, a 5.7.8 or 5.1.8 at RCPT that quotes nobody: our account."""
    for stage, reply in (("mail", "550 5.7.1 Sender address rejected: not owned by user"),
                         ("rcpt", "535 5.7.8 Authentication credentials invalid"),
                         ("rcpt", "553 5.1.8 <no-reply@example.org>: Sender address rejected: Domain not found"),
                         ("rcpt", "530 5.7.0 Authentication required")):  # fmt: skip
        result = _smtp_send(_behaviour(stage, reply))
        assert (result.error_class, result.stops_channel) == (CONFIGURATION, True), reply


def test_a_failed_configuration_session_still_ends_with_quit():
    """A refused login is our configuration: the session ends properly, with QUIT, not a dropped socket."""
    import time

    with FakeSmtpServer(credentials=("user", "right")) as fake:
        channel = SmtpChannel(
            SmtpConfig(host=fake.host, port=fake.port, timeout=2.0, username="user", password="wrong")
        )
        result = channel.send(render("email", "ada@example.com"), soon())
        assert result.error_class == CONFIGURATION and result.stops_channel and fake.auth_failures == 1
        deadline = time.monotonic() + 2
        while fake.quits < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert fake.quits == 1
