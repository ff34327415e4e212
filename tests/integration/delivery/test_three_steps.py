"""Three ordered steps end to end: create through the HTTP stack, dispatch through the real worker to
SMTP- and Twilio-speaking local servers, confirm through the confirm target. Each later step goes out
after its delay, or at once when the step before it fails for good (a chain); the first proof ends
the steps not sent yet; the read API tells each step's outcome and the proof's channel; a replay
answers the same three steps."""

from __future__ import annotations

import re
import uuid

import pytest

from signup_verification.operations import signal_records, signals, status_table
from support.dispatch import provider_settings, run_dispatch
from support.fakes.smtp import SmtpBehaviour
from support.fakes.twilio import FakeTwilio
from support.policy import steps_of, token_in
from support.signup_requests import post_create

MOBILE = "+14155550100"
EMAIL_SMS_WHATSAPP = [
    {"channel": "email", "destination": "ada@example.com"},
    {"channel": "sms", "destination": MOBILE, "after_seconds": 60},
    {"channel": "whatsapp", "destination": MOBILE, "after_seconds": 120},
]


@pytest.fixture
def targets(configured_app):
    create = configured_app("create_verification", RATE_LIMIT_SPACING_SECONDS="0")
    return create, configured_app("confirm_verification")


def _code(text: str) -> str:
    """The code a message carries: six digits, or six digits spoken one at a time ('1, 2, 3, ...')."""
    found = re.search(r"\d(?:, \d){5}", text)
    return found.group(0).replace(", ", "") if found else re.search(r"\d{6}", text).group(0)


def _make_due(db, vid: uuid.UUID, step: int) -> None:
    """'Wait after_seconds' without waiting: the step's schedule moves into the past."""
    db.run(
        "UPDATE delivery_intents SET next_attempt_at = now() - interval '1 second'"
        " WHERE verification_id = :v AND role <> 'event' AND intent_step(verification_id, id) = :step",
        v=vid,
        step=step,
    )


def _sent_on(twilio: FakeTwilio, channel: str) -> list:
    return [d for d in twilio.deliveries if d.destination.startswith("whatsapp:") == (channel == "whatsapp")]


def test_each_step_on_its_delay_and_a_proof_at_step_2_ends_step_3(db, targets, smtp, twilio):
    create, confirm = targets
    first = post_create(create, {"account_id": "acct-1", "steps": EMAIL_SMS_WHATSAPP}, "k1")
    assert first.status_code == 201, first.get_data(as_text=True)
    vid = uuid.UUID(first.get_json()["verification_id"])
    assert first.get_json()["steps"] == [
        {"channel": "email", "after_seconds": 0},
        {"channel": "sms", "after_seconds": 60},
        {"channel": "whatsapp", "after_seconds": 120},
    ]
    settings = provider_settings(smtp, twilio)
    run_dispatch(db, settings)
    assert len(smtp.received) == 1 and not twilio.deliveries  # step 1 only: the others wait
    _make_due(db, vid, 2)  # its delay passed without a proof
    assert run_dispatch(db, settings).accepted == 1
    [sms] = _sent_on(twilio, "sms")
    answer = confirm.post("/", json={"verification_id": str(vid), "code": _code(sms.body)}).get_json()
    assert (answer["verified_channel"], answer["proof"]["channel"]) == ("sms", "sms")
    _make_due(db, vid, 3)
    assert run_dispatch(db, settings).claimed == 0 and not _sent_on(twilio, "whatsapp")  # never after a proof
    state = create.get(f"/{vid}").get_json()
    assert [(d["step"], d["channel"], d["role"], d["status"]) for d in state["deliveries"]] == [
        (1, "email", "primary", "accepted"),
        (2, "sms", "fallback", "accepted"),
        (3, "whatsapp", "fallback", "suppressed"),
    ]
    assert state["verified_channel"] == "sms" and [p["channel"] for p in state["proofs"]] == ["sms"]
    # the email's link still proves the address, after the fact
    link = token_in(smtp.received[0].message.get_body(("plain",)).get_content())
    later = confirm.post("/", json={"token": link}).get_json()
    assert [p["channel"] for p in later["proofs"]] == ["sms", "email"]
    # the same request again: the first answer, the same three steps, nothing written
    replay = post_create(create, {"account_id": "acct-1", "steps": EMAIL_SMS_WHATSAPP}, "k1")
    assert replay.headers.get("Idempotent-Replayed") == "true" and replay.get_json() == first.get_json()
    assert len(steps_of(db, vid)) == 3


def test_a_final_failure_brings_the_next_step_forward_down_the_chain(db, targets, smtp, twilio):
    create, confirm = targets
    smtp.behaviour = SmtpBehaviour(rcpt_reply=lambda a: "550 5.1.1 <ada@example.com> no such user")
    twilio.by_destination[MOBILE] = FakeTwilio.error(400, 21211, "The 'To' number is not a valid phone number.")
    steps = [{**s, "after_seconds": 300} if s["channel"] != "email" else s for s in EMAIL_SMS_WHATSAPP]
    vid = uuid.UUID(post_create(create, {"account_id": "acct-1", "steps": steps}, "k1").get_json()["verification_id"])
    settings = provider_settings(smtp, twilio)
    for _ in range(4):  # the email fails, the SMS comes forward and fails, the WhatsApp comes forward
        run_dispatch(db, settings)
        if _sent_on(twilio, "whatsapp"):
            break
    [whatsapp] = _sent_on(twilio, "whatsapp")
    email, sms, step3 = steps_of(db, vid)
    assert (email["status"], sms["status"], step3["status"]) == ("failed", "failed", "accepted")
    assert sms["brought_forward_at"] is not None and step3["brought_forward_at"] is not None
    answer = confirm.post("/", json={"verification_id": str(vid), "code": _code(whatsapp.body)}).get_json()
    assert (answer["verified_channel"], answer["verified_via"]) == ("whatsapp", "code")
    state = create.get(f"/{vid}").get_json()
    assert [(d["status"], (d["reason"] or {}).get("category")) for d in state["deliveries"]] == [
        ("failed", "bounced"),
        ("failed", "invalid_destination"),
        ("accepted", None),
    ]
    # the signals say which step went out and why: the SMS as step 2, the WhatsApp as step 3, each
    # brought forward by the failure of the step before it
    snapshot = signals.compute(db, "test")
    whatsapp_steps, sms_steps = snapshot.channel("whatsapp").later_steps, snapshot.channel("sms").later_steps
    assert (whatsapp_steps["3"]["brought_forward"], sum(whatsapp_steps["2"].values())) == (1, 0)
    assert (sms_steps["2"]["brought_forward"], sum(sms_steps["3"].values())) == (1, 0)
    record = signal_records.record_fields(snapshot, snapshot.channel("whatsapp"), "dispatch")
    assert (record["step3_brought_forward"], record["step2_brought_forward"], record["step3_timer"]) == (1, 0, 0)
    assert "later steps on whatsapp (5 min): step 3 sent 1 (timer 0, brought forward 1, at once 0)" in (
        status_table.render(snapshot)
    )


def test_whatsapp_then_sms_then_a_call_each_after_its_delay(db, targets, twilio):
    create, confirm = targets
    steps = [
        {"channel": "whatsapp", "destination": MOBILE},
        {"channel": "sms", "destination": MOBILE, "after_seconds": 30},
        {"channel": "voice", "destination": MOBILE, "after_seconds": 90},
    ]
    vid = uuid.UUID(post_create(create, {"account_id": "acct-1", "steps": steps}, "k1").get_json()["verification_id"])
    settings = provider_settings(twilio=twilio)
    for step in (1, 2, 3):
        _make_due(db, vid, step)
        assert run_dispatch(db, settings).accepted == 1
    whatsapp, sms, call = twilio.deliveries
    assert "Twiml" in call.request and whatsapp.destination == "whatsapp:" + MOBILE and sms.destination == MOBILE
    codes = [_code(d.body) for d in (whatsapp, sms, call)]
    assert len(set(codes)) == 3  # a code of its own per step
    snapshot = signals.compute(db, "test")  # each later step counted as its step, its timer passed
    assert snapshot.channel("sms").later_steps["2"]["timer"] == snapshot.channel("voice").later_steps["3"]["timer"] == 1
    answer = confirm.post("/", json={"verification_id": str(vid), "code": codes[2]}).get_json()
    assert answer["verified_channel"] == "voice"
    for code, proved in ((codes[0], "whatsapp"), (codes[1], "sms")):  # each earlier step's code proves its own
        assert confirm.post("/", json={"verification_id": str(vid), "code": code}).get_json()["proof"]["channel"] == (
            proved
        )
    assert [p["channel"] for p in create.get(f"/{vid}").get_json()["proofs"]] == ["voice", "whatsapp", "sms"]
