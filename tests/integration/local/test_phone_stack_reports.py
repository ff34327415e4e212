"""The local stack for WhatsApp and calls over real HTTP: create and delivery_reports served, the
dispatcher sending to the mailbox's fake Twilio, its reporter posting the signed callbacks, and the
report path ending a call a machine answered through the fake's Calls API. The callbacks start a second
after the fake took the message or call (a call rings first), after the dispatcher settled it."""

from __future__ import annotations

import time
import uuid
from types import SimpleNamespace

import pytest

from signup_verification import runtime
from signup_verification.local.mailbox import MailboxServer
from support.dev_process import free_ports
from support.dispatch import provider_settings, run_dispatch
from support.served import serve
from support.signup_requests import post_create

SID, AUTH = "AC" + "4" * 32, "local-phone-stack-token"


@pytest.fixture
def stack(service_env, db, monkeypatch):
    ports = free_ports()
    reports_url = f"http://127.0.0.1:{ports['base'] + 5}"
    mailbox = MailboxServer("127.0.0.1", ports["smtp"], ports["mailbox"], twilio_account_sid=SID,
                            twilio_auth_token=AUTH, reports={"twilio_auth_token": AUTH, "delay": 1.0}).start()  # fmt: skip
    settings = {"DELIVERY_REPORTS_URL": reports_url, "TWILIO_AUTH_TOKEN": AUTH, "TWILIO_ACCOUNT_SID": SID,
                "TWILIO_API_URL": mailbox.web_url, "RATE_LIMIT_SPACING_SECONDS": "0", "TWILIO_FROM": "+15005550006"}  # fmt: skip
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    runtime.reset()
    with serve("create_verification", "delivery_reports", ports={"delivery_reports": ports["base"] + 5}) as urls:
        twilio = SimpleNamespace(account_sid=SID, auth_token=AUTH, url=mailbox.web_url)
        config = provider_settings(twilio=twilio, delivery_reports_url=reports_url)
        yield SimpleNamespace(urls=urls, mailbox=mailbox, dispatch=lambda: run_dispatch(db, config))
    mailbox.stop()


def _wait(stack, sid: str, state: str, timeout: float = 20):
    deadline = time.monotonic() + timeout
    while True:
        [message] = [m for m in stack.mailbox.mailbox.messages() if m.sid == sid]
        if message.delivery == state:
            return message
        assert time.monotonic() < deadline, (message.delivery, message.delivery_note)
        time.sleep(0.05)


@pytest.mark.parametrize(
    "channel, number, final, delivered",
    [("voice", "+14155550100", "completed", True), ("voice", "+12025550172", "completed", False),
     ("voice", "+12025550170", "busy", False), ("whatsapp", "+14155550100", "read", True),
     ("whatsapp", "+12025550180", "undelivered", False)],
)  # fmt: skip
def test_a_phone_step_on_the_local_stack(stack, db, caplog, channel, number, final, delivered):
    steps = [{"channel": channel, "destination": number},
             {"channel": "email", "destination": "ada@example.com", "after_seconds": 300}]  # fmt: skip
    created = post_create(
        stack.urls["create_verification"], {"account_id": "acct-1", "steps": steps}, str(uuid.uuid4())
    )
    assert created.status_code == 201, created.text
    vid = created.json()["verification_id"]
    assert stack.dispatch().accepted == 1
    ref = db.run("SELECT provider_ref FROM delivery_attempts WHERE outcome = 'accepted'")[0][0]
    shown = _wait(stack, ref, final)
    rows = {r["channel"]: r for r in db.rows("SELECT * FROM delivery_intents WHERE verification_id = :v", v=vid)}
    assert (rows[channel]["delivered_at"] is not None) is delivered, shown.delivery_note
    assert (rows["email"]["brought_forward_at"] is not None) is not delivered
    ended = [r.json_fields for r in caplog.records if getattr(r, "json_fields", {}).get("event") == "call_ended"]
    # a machine answered: the report path ended the call at the fake, once
    assert ended == ([{"event": "call_ended", "call": ref, "over": True, "detail": "ended"}]
                     if number == "+12025550172" else [])  # fmt: skip
