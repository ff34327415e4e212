"""The local emulation's WhatsApp and call reports over real HTTP: the mailbox's reporter posts the
signed callbacks Twilio would (local/provider_reports.py) to a served delivery_reports target, for
the sandbox's numbers (local/sandbox.py), and each outcome reaches the intent."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from signup_verification import runtime
from signup_verification.local import provider_reports, sandbox
from signup_verification.local.mailstore import Mailbox, Message
from support.dev_process import free_ports
from support.reports import phone_step
from support.served import serve

SID, AUTH = "AC" + "3" * 32, "local-phone-report-token"


@pytest.fixture
def reporting(service_env, db, monkeypatch):
    """(mailbox, reporter, the StatusCallback URL) with delivery_reports served on its configured URL."""
    port = free_ports()["base"] + 5
    reports_url = f"http://127.0.0.1:{port}"
    for name, value in {"DELIVERY_REPORTS_URL": reports_url, "TWILIO_AUTH_TOKEN": AUTH}.items():
        monkeypatch.setenv(name, value)
    runtime.reset()
    with serve("delivery_reports", ports={"delivery_reports": port}):
        mailbox = Mailbox()
        reporter = provider_reports.Reporter(mailbox, twilio_account_sid=SID, twilio_auth_token=AUTH, delay=0)
        reporter.start()
        try:
            yield mailbox, reporter, reports_url + "/twilio"
        finally:
            reporter.stop()


def taken(mailbox: Mailbox, kind: str, sid: str, to: str, callback: str) -> Message:
    """A message or call the fake Twilio took, as the mailbox keeps it."""
    return mailbox._add(lambda i: Message(i, kind, datetime.now(UTC), "+15005550006", [to], "", "Your code",
                                          sid=sid, status_callback=callback))  # fmt: skip


def settled(mailbox: Mailbox, message: Message, state: str, timeout: float = 20) -> Message:
    deadline = time.monotonic() + timeout
    while (current := mailbox.get(message.id)).delivery != state:
        assert time.monotonic() < deadline, (current.delivery, current.delivery_note)
        time.sleep(0.05)
    return current


def intent(db, intent_id: int) -> dict:
    return db.one("SELECT * FROM delivery_intents WHERE id = :i", i=intent_id)


@pytest.mark.parametrize(
    "number, outcome", [(n, o) for n, o in sandbox.CALL_REPORTS.items()] + [("+14155550100", "human")]
)
def test_each_sandbox_call_outcome_reaches_the_step(reporting, db, number, outcome):
    mailbox, reporter, callback = reporting
    step = phone_step(db, "voice", key=f"call-{outcome}")
    message = taken(mailbox, "voice", step["ref"], number, callback)
    reporter.sms_accepted(message)
    shown = settled(mailbox, message, "completed" if outcome in ("human", "machine") else outcome)
    assert shown.delivery_note.startswith("Twilio ") and " 200 " in shown.delivery_note, shown.delivery_note
    row = intent(db, step["intent_id"])
    fallback = intent(db, step["fallback_id"])
    if outcome == "human":
        assert row["delivered_at"] is not None and fallback["brought_forward_at"] is None
    else:
        assert row["status"] == "failed" and fallback["brought_forward_at"] is not None
    assert db.run("SELECT count(*) FROM destination_suppressions")[0][0] == 0


@pytest.mark.parametrize("number", ["+14155550100", *sandbox.WHATSAPP_REPORTS])
def test_each_sandbox_whatsapp_outcome_reaches_the_step(reporting, db, number):
    mailbox, reporter, callback = reporting
    step = phone_step(db, "whatsapp", key=f"wa-{number}")
    message = taken(mailbox, "whatsapp", step["ref"], "whatsapp:" + number, callback)
    reporter.sms_accepted(message)
    final, code = sandbox.WHATSAPP_REPORTS.get(number, ("read", None))
    settled(mailbox, message, final)
    row = intent(db, step["intent_id"])
    if code is None:
        assert row["delivered_at"] is not None
    else:
        assert (row["status"], row["failure_code"]) == ("failed", str(code))
        assert intent(db, step["fallback_id"])["brought_forward_at"] is not None
