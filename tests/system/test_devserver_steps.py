"""Three ordered steps, WhatsApp -> SMS -> voice, against `verifyctl dev` as a site's test suite runs
them: the sandbox's WhatsApp failure number brings SMS forward before its delay, delays alone bring
each later step out, a code from the mailbox (an SMS's text, a call's spoken digits) proves, the step
after the proof is never sent, and the site's webhook endpoint (a Standard Webhooks receiver) is told
each step's outcome and the proof's channel. The call goes to the sandbox's landline, which create
accepts for calls only.

One `verifyctl dev` for the module, on the suite's PostgreSQL; callbacks 1 s after the fake Twilio
takes a message, the scheduler every second.
"""

from __future__ import annotations

import re
import time
import uuid

import pytest
import requests

from signup_verification.local import sandbox
from support.dev_process import DevProcess
from support.fakes.webhooks import FakeWebhookReceiver
from support.paths import TEST_TOKEN_KEYS
from support.signup_requests import created_json

pytestmark = pytest.mark.slow

WHATSAPP_FAILS = "+12025550180"
assert sandbox.WHATSAPP_REPORTS[WHATSAPP_FAILS] == ("undelivered", 63003)


@pytest.fixture(scope="module")
def site():
    with FakeWebhookReceiver() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def dev(module_database_url, tmp_path_factory, site):
    env = {
        "DATABASE_URL": module_database_url,
        "TOKEN_KEYS": TEST_TOKEN_KEYS,
        "VERIFY_LOCAL_DIR": str(tmp_path_factory.mktemp("steps-local")),
        "WEBHOOK_URL": site.endpoint,
        "WEBHOOK_SECRET": site.secrets[0],
        "WEBHOOK_EVENTS": "all",  # each step's outcome too: delivery.delivered, delivery.bounced
        "RATE_LIMIT_SPACING_SECONDS": "0",
        "RATE_LIMIT_PREFIX_PER_HOUR": "1000",  # the sandbox's numbers share one prefix
    }
    with DevProcess(env, "--schedule-seconds", "1", "--report-delay", "1") as process:
        yield process
        assert process.interrupt() == 0


def _number() -> str:
    return "+1415555" + str(uuid.uuid4().int % 10_000).zfill(4)


def _messages(dev: DevProcess, to: str) -> list[dict]:
    everything = requests.get(dev.mailbox_url + "/api/messages", timeout=10).json()
    return [m for m in everything if m["to"] in ([to], ["whatsapp:" + to])]


def _wait_for(dev: DevProcess, to: str, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while not (found := _messages(dev, to)):
        assert time.monotonic() < deadline, f"nothing reached {to}:\n" + "\n".join(dev.lines[-30:])
        time.sleep(0.2)
    return found[0]


def _events(site: FakeWebhookReceiver, verification_id: str, wanted: set[str], timeout: float = 30.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        mine = [e for e in site.events() if e["data"].get("verification_id") == verification_id]
        if wanted <= {e["type"] for e in mine}:
            return mine
        assert time.monotonic() < deadline, [e["type"] for e in mine]
        time.sleep(0.2)


def _delivered(site: FakeWebhookReceiver, verification_id: str) -> list[dict]:
    return [e["data"]["delivery"] for e in site.events()
            if e["type"] == "delivery.delivered" and e["data"]["verification_id"] == verification_id]  # fmt: skip


def _create(dev: DevProcess, steps: list[dict]) -> str:
    body = {"account_id": f"acct-{uuid.uuid4().hex[:8]}", "steps": steps}
    return created_json(dev.create_url, body)["verification_id"]


def _confirm(dev: DevProcess, verification_id: str, code: str) -> dict:
    answer = requests.post(dev.confirm_url, json={"verification_id": verification_id, "code": code}, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _read(dev: DevProcess, verification_id: str) -> dict:
    answer = requests.get(dev.create_url + verification_id, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_whatsapp_failure_brings_sms_forward_and_its_code_ends_the_steps(dev, site):
    sms, voice = _number(), _number()
    started = time.monotonic()
    vid = _create(dev, [{"channel": "whatsapp", "destination": WHATSAPP_FAILS},
                        {"channel": "sms", "destination": sms, "after_seconds": 120},
                        {"channel": "voice", "destination": voice, "after_seconds": 240}])  # fmt: skip
    message = _wait_for(dev, sms)
    assert time.monotonic() - started < 60  # the failure report brought it, not its 120 s
    [whatsapp] = [m for m in _messages(dev, WHATSAPP_FAILS) if m["delivery"] == "undelivered"] or [None]
    assert whatsapp is not None and whatsapp["kind"] == "whatsapp"

    assert message["code"] == re.search(r"\b(\d{6})\b", message["text"]).group(1)  # the mailbox's code to copy
    assert _confirm(dev, vid, message["code"])["status"] == "verified"
    events = _events(site, vid, {"delivery.bounced", "verification.verified"})
    [bounced] = [e["data"]["delivery"] for e in events if e["type"] == "delivery.bounced"]
    assert (bounced["step"], bounced["channel"], bounced["status"]) == (1, "whatsapp", "undeliverable")
    assert (bounced["reason"]["category"], bounced["reason"]["code"]) == ("invalid_destination", "63003")
    [verified] = [e["data"] for e in events if e["type"] == "verification.verified"]
    assert verified["verified_channel"] == "sms"

    read = _read(dev, vid)
    assert read["verified_channel"] == "sms"
    assert [(d["step"], d["channel"], d["status"]) for d in read["deliveries"]][::2] == [
        (1, "whatsapp", "undeliverable"), (3, "voice", "suppressed")]  # fmt: skip
    assert read["deliveries"][1]["channel"] == "sms" and read["deliveries"][1]["status"] in ("accepted", "delivered")
    time.sleep(2)  # two more scheduler runs: the voice step stays unsent
    assert _messages(dev, voice) == []


def test_delays_alone_bring_sms_then_a_call_whose_spoken_code_proves(dev, site):
    whatsapp, sms, voice = _number(), _number(), sandbox.LANDLINE  # a landline: calls reach it
    started = time.monotonic()
    vid = _create(dev, [{"channel": "whatsapp", "destination": whatsapp},
                        {"channel": "sms", "destination": sms, "after_seconds": 2},
                        {"channel": "voice", "destination": voice, "after_seconds": 4}])  # fmt: skip
    assert _wait_for(dev, whatsapp)["kind"] == "whatsapp"
    _wait_for(dev, sms)
    assert time.monotonic() - started >= 2
    call = _wait_for(dev, voice)
    assert time.monotonic() - started >= 4 and call["kind"] == "voice"
    spoken = re.findall(r"\b\d(?:, \d){5}\b", call["text"])  # digit by digit, twice
    assert len(spoken) == 2 and spoken[0] == spoken[1], call["text"]
    code = spoken[0].replace(", ", "")
    assert call["code"] == code  # the mailbox's code to copy

    assert _confirm(dev, vid, code)["status"] == "verified"
    events = _events(site, vid, {"verification.verified"})
    [verified] = [e["data"] for e in events if e["type"] == "verification.verified"]
    assert verified["verified_channel"] == "voice"
    deadline = time.monotonic() + 30  # each step's report: the call's `completed` may follow the proof
    while {d["step"] for d in _delivered(site, vid)} != {1, 2, 3}:
        assert time.monotonic() < deadline, _delivered(site, vid)
        time.sleep(0.2)
    assert sorted((d["step"], d["channel"]) for d in _delivered(site, vid)) == [
        (1, "whatsapp"), (2, "sms"), (3, "voice")]  # fmt: skip
    read = _read(dev, vid)
    assert read["verified_channel"] == "voice"
    assert [d["channel"] for d in read["deliveries"]] == ["whatsapp", "sms", "voice"]
    assert [d["status"] for d in read["deliveries"]] == ["delivered"] * 3
