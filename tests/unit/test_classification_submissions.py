"""Every row of every provider's table, synchronously: the adapter meets the refusal from a local
server speaking the provider's protocol, and its result carries exactly the row's verdict (final,
whose fault, which reason, whether it holds the channel), the label settle records, and whether
the channel stops for the invocation."""

from __future__ import annotations

import pytest

from signup_verification.delivery.channels.base import CONFIGURATION
from signup_verification.delivery.channels.smtp import SmtpChannel
from signup_verification.delivery.classification import Category, Fault, Rule, Verdict
from signup_verification.delivery.classification import sendgrid as sendgrid_table
from signup_verification.delivery.classification import smtp as smtp_table
from signup_verification.delivery.classification import twilio as twilio_table
from signup_verification.delivery.config import SmtpConfig
from support.channels import PHONE, render, sendgrid_channel, soon, twilio_channel
from support.fakes.http import Answer, FakeSendGrid, FakeTwilio
from support.fakes.smtp import FakeSmtpServer, SmtpBehaviour


def expect(result, rule: Rule, provider: str, code: str) -> None:
    assert result.outcome == "failed"
    assert result.verdict == Verdict.of(rule, provider, code)
    label = CONFIGURATION if rule.holds_channel and rule.category is Category.SENDER_MISCONFIGURED else rule.category
    assert result.error_class == label
    assert result.stops_channel == rule.holds_channel
    assert result.verdict.suppresses == (rule.fault is Fault.RECIPIENT)


@pytest.fixture(scope="module")
def twilio():
    with FakeTwilio() as fake:
        yield fake


@pytest.mark.parametrize("code", sorted(twilio_table.ERRORS))
def test_every_twilio_error_code_at_submission(twilio, code):
    twilio.script(FakeTwilio.error(400, code, f"Twilio error {code} about {PHONE}"))
    result = twilio_channel(twilio).send(render("sms", PHONE), soon())
    expect(result, twilio_table.ERRORS[code], "twilio", str(code))
    assert PHONE not in result.detail


def test_an_unlisted_twilio_refusal_is_final_and_blames_nobody(twilio):
    twilio.script(FakeTwilio.error(400, 21999, "something new"))
    result = twilio_channel(twilio).send(render("sms", PHONE), soon())
    expect(result, twilio_table.UNKNOWN, "twilio", "21999")


_SENDGRID_ANSWERS = {
    "400 personalizations": Answer(
        400, {"errors": [{"field": "personalizations.0.to.0.email", "message": "Does not contain a valid address."}]}
    ),
    "400 from": Answer(400, {"errors": [{"field": "from.email", "message": "The from email is not valid."}]}),
    "400": Answer(400, {"errors": [{"field": "content.0.value", "message": "invalid"}]}),
    "401": Answer(401, {"errors": [{"message": "The provided authorization grant is invalid"}]}),
    "403": Answer(403, {"errors": [{"message": "access forbidden"}]}),
    "406": Answer(406, {"errors": [{"message": "Not Acceptable"}]}),
    "413": Answer(413, {"errors": [{"message": "too large"}]}),
    "415": Answer(415, {"errors": [{"message": "Unsupported Media Type"}]}),
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


# An SMTP reply for each row: RCPT unless the row is about the message (DATA).
_SMTP_REPLIES = [
    *[
        (code, f"550 {code} <ada@example.com>: refused", "rcpt", rule)
        for code, rule in smtp_table.ENHANCED.items()
        if code not in ("5.2.3", "5.3.4")
    ],  # fmt: skip
    ("5.2.3", "552 5.2.3 message too long", "data", smtp_table.ENHANCED["5.2.3"]),
    ("5.3.4", "552 5.3.4 message too big for system", "data", smtp_table.ENHANCED["5.3.4"]),
    ("5.1.99", "550 5.1.99 unlisted addressing status", "rcpt", smtp_table.SUBJECTS["5.1"]),
    ("5.7.99", "550 5.7.99 unlisted policy status", "rcpt", smtp_table.SUBJECTS["5.7"]),
    ("5.1.1", "550 5.1.1 <no-reply@example.org>: Sender address rejected: not owned", "rcpt", smtp_table.REFUSES_US),
    ("5.7.1", "554 5.7.1 <ada@example.com>: Relay access denied", "rcpt", smtp_table.REFUSES_US),
    ("550", "550 no such user here", "rcpt", smtp_table.NO_SUCH_MAILBOX),
    ("554", "554 Transaction failed: content refused", "data", smtp_table.MESSAGE_REFUSED),
    ("554", "554 go away", "rcpt", smtp_table.OTHER),
]


@pytest.mark.parametrize(("code", "reply", "stage", "rule"), _SMTP_REPLIES, ids=[r[1][:40] for r in _SMTP_REPLIES])
def test_every_smtp_permanent_refusal(code, reply, stage, rule):
    behaviour = SmtpBehaviour(rcpt_reply=lambda address: reply) if stage == "rcpt" else SmtpBehaviour(data_reply=reply)
    with FakeSmtpServer() as fake:
        fake.behaviour = behaviour
        channel = SmtpChannel(SmtpConfig(host=fake.host, port=fake.port, timeout=2.0))
        result = channel.send(render("email", "ada@example.com"), soon())
        expect(result, rule, "smtp", code)
        assert "ada@example.com" not in result.detail
        channel.close()


def test_every_row_of_each_table_is_exercised_here():
    smtp_rows = {r[3] for r in _SMTP_REPLIES}
    tables = [*smtp_table.ENHANCED.values(), *smtp_table.SUBJECTS.values(), smtp_table.REFUSES_US,
              smtp_table.NO_SUCH_MAILBOX, smtp_table.MESSAGE_REFUSED, smtp_table.OTHER]  # fmt: skip
    assert all(rule in smtp_rows for rule in tables)


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
