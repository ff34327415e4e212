"""A step's code proves only once a send of that step began: before, nobody was given it. The right
code of a step not sent yet is a wrong code (counted, answered as any other); it proves as soon as
its send started, in flight or ambiguous; a step a proof cancelled never proves; a step brought
forward by a failure proves with its own code once sent."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from signup_verification.outbox import transitions as t
from signup_verification.outbox.config import ChannelPolicy, RetryPolicy
from signup_verification.outbox.transitions import Settlement
from signup_verification.verifications import confirm as c
from signup_verification.verifications import create as create_domain
from support.dispatch import KEYRING, provider_settings
from support.policy import THREE_STEPS, create_steps, sent

SETTINGS = provider_settings()


def _created(db, steps=THREE_STEPS) -> uuid.UUID:
    outcome = create_steps(db, SETTINGS.create, steps)
    assert isinstance(outcome, create_domain.Created), outcome
    return uuid.UUID(outcome.verification.verification_id)


def _code(db, vid: uuid.UUID, channel: str) -> str:
    nonce = bytes(db.one("SELECT token_nonce FROM verifications WHERE id = :v", v=vid)["token_nonce"])
    return KEYRING.primary.code(channel, vid, nonce, 6)


def _wrong(code: str) -> str:
    return f"{(int(code) + 1) % 1_000_000:06d}"


def _state(db, vid: uuid.UUID) -> dict:
    return db.one(
        "SELECT status, verified_channel, second_proof_at, confirm_failures FROM verifications WHERE id = :v", v=vid
    )


def _claimed(db, channel: str, *, begin: bool = False) -> t.ClaimedIntent:
    """The one eligible intent (it must be on `channel`), claimed; with `begin`, the fused claim's way."""
    [claimed] = t.claim(db, "w", 10, 30, begin=begin)
    assert claimed.channel == channel
    return claimed


def test_the_right_code_of_a_step_not_sent_yet_is_a_wrong_code_and_counts(db):
    vid = _created(db)  # email now, SMS in 60 s, WhatsApp in 120 s
    sms = _code(db, vid, "sms")
    wrong = c.confirm_code(db, KEYRING, vid, _wrong(sms))
    early = c.confirm_code(db, KEYRING, vid, sms)
    assert (wrong.result, wrong.remaining_attempts, early.remaining_attempts) == (c.WRONG_CODE, 4, 3)
    assert replace(early, remaining_attempts=4) == wrong  # the same answer: nothing said about the SMS step
    assert c.confirm_code(db, KEYRING, vid, _code(db, vid, "whatsapp")).result == c.WRONG_CODE
    assert _state(db, vid) == {"status": "pending", "verified_channel": None, "second_proof_at": None,
                               "confirm_failures": 3}  # fmt: skip
    sent(db, vid, "sms")  # its time came: the SMS went out
    proved = c.confirm_code(db, KEYRING, vid, sms)
    assert (proved.result, proved.presented, proved.verified_channel) == (c.VERIFIED, "sms", "sms")


def test_a_step_proves_once_its_send_started_not_when_a_claim_only_began_it(db):
    vid = _created(db, (("sms", "+14155550100", 0),))
    code = _code(db, vid, "sms")
    claimed = _claimed(db, "sms", begin=True)  # the fused claim: attempt 1 begun, its send not started
    assert c.confirm_code(db, KEYRING, vid, code).result == c.WRONG_CODE
    t.release(db, "w", [claimed.fence])  # shut down before the send: released, never sent
    assert c.confirm_code(db, KEYRING, vid, code).result == c.WRONG_CODE
    again = _claimed(db, "sms", begin=True)
    t.start(db, "w", [again.fence])  # handed over: in flight, the provider may have delivered it already
    assert c.confirm_code(db, KEYRING, vid, code).result == c.VERIFIED
    assert _state(db, vid)["confirm_failures"] == 2


@pytest.mark.parametrize("outcome", ["ambiguous", "retryable"])
def test_an_ambiguous_send_may_have_reached_the_person_a_retryable_one_did_not(db, outcome):
    vid = _created(db, (("sms", "+14155550100", 0),))
    claimed = _claimed(db, "sms")
    t.begin_attempts(db, "w", [claimed.fence])
    t.settle(db, "w", [Settlement(claimed.id, claimed.lease_version, outcome, 0, "timeout", "x")])
    if outcome == "ambiguous":  # its hold over, to be sent again (an SMS policy of `retry`)
        assert t.resolve_ambiguous(db, RetryPolicy(channels={"sms": ChannelPolicy("retry", 0.0)}), 10)
    _claimed(db, "sms", begin=True)  # the next attempt, claimed again: its send not started yet
    result = c.confirm_code(db, KEYRING, vid, _code(db, vid, "sms")).result
    assert result == (c.VERIFIED if outcome == "ambiguous" else c.WRONG_CODE)


def test_steps_a_proof_cancelled_never_prove_and_are_no_longer_told_pending(db):
    vid = _created(db)
    nonce = bytes(db.one("SELECT token_nonce FROM verifications WHERE id = :v", v=vid)["token_nonce"])
    assert c.confirm_link(db, KEYRING, KEYRING.primary.link(vid, nonce)).result == c.VERIFIED
    for channel in ("sms", "whatsapp"):  # suppressed by the proof: never sent
        answer = c.confirm_code(db, KEYRING, vid, _code(db, vid, channel))
        assert answer.result == c.FINISHED and answer.remaining_attempts is None  # no "try again"
    state = _state(db, vid)
    assert (state["verified_channel"], state["second_proof_at"], state["confirm_failures"]) == ("email", None, 2)
    assert t.claim(db, "w", 10, 30) == []  # and nothing is sent after the proof


def test_a_step_sent_before_the_proof_still_proves_after_it(db):
    vid = _created(db)
    sent(db, vid, "sms")
    nonce = bytes(db.one("SELECT token_nonce FROM verifications WHERE id = :v", v=vid)["token_nonce"])
    assert c.confirm_link(db, KEYRING, KEYRING.primary.link(vid, nonce)).result == c.VERIFIED
    assert c.confirm_code(db, KEYRING, vid, _code(db, vid, "sms")).result == c.VERIFIED  # a later proof
    assert c.confirm_code(db, KEYRING, vid, _code(db, vid, "whatsapp")).result == c.FINISHED  # cancelled
    assert _state(db, vid)["second_proof_at"] is not None


def test_a_voice_step_brought_forward_by_the_sms_failure_proves_with_the_voice_code(db):
    vid = _created(db, (("sms", "+14155550100", 0), ("voice", "+14155550100", 60)))
    sms = _claimed(db, "sms")
    t.begin_attempts(db, "w", [sms.fence])
    t.settle(db, "w", [Settlement(sms.id, sms.lease_version, "failed", 0, "rejected", "21610")])
    voice_code = _code(db, vid, "voice")
    voice = _claimed(db, "voice")  # brought forward: due now, not in 60 s
    assert c.confirm_code(db, KEYRING, vid, voice_code).result == c.WRONG_CODE  # claimed, not called yet
    t.begin_attempts(db, "w", [voice.fence])  # the call is being placed
    proved = c.confirm_code(db, KEYRING, vid, voice_code)
    assert (proved.result, proved.presented, proved.verified_channel) == (c.VERIFIED, "voice", "voice")
    assert proved.proof is not None and proved.proof.via == "code"


def test_a_proof_while_a_step_waits_claimed_ahead_suppresses_it_and_its_start_sends_nothing(db):
    """A batch claimed ahead waits behind slow sends with its attempts begun, not started: a proof
    meanwhile ends the step for good, and the worker's start finds it gone (a stale write)."""
    vid = _created(db, (("email", "ada@example.com", 0), ("sms", "+14155550100", 0)))
    claimed = {i.channel: i for i in t.claim(db, "w", 10, 30, begin=True)}
    assert set(claimed) == {"email", "sms"} and all(i.begun for i in claimed.values())
    assert len(t.start(db, "w", [claimed["email"].fence])) == 1
    t.settle(db, "w", [Settlement(claimed["email"].id, claimed["email"].lease_version, "accepted", provider_ref="m1")])
    nonce = bytes(db.one("SELECT token_nonce FROM verifications WHERE id = :v", v=vid)["token_nonce"])
    assert c.confirm_link(db, KEYRING, KEYRING.primary.link(vid, nonce)).result == c.VERIFIED
    sms = claimed["sms"]
    assert t.start(db, "w", [sms.fence]) == []  # fenced out: never handed to Twilio
    row = db.one("SELECT status, suppression_reason, sending_at, lease_owner FROM delivery_intents WHERE id = :i",
                 i=sms.id)  # fmt: skip
    assert row == {"status": "suppressed", "suppression_reason": "verified", "sending_at": None, "lease_owner": None}
    log = db.rows("SELECT outcome FROM delivery_attempts WHERE intent_id = :i ORDER BY id", i=sms.id)
    assert [r["outcome"] for r in log] == ["attempting", "released"]  # the begun attempt ended, not a send
    assert t.settle(db, "w", [Settlement(sms.id, sms.lease_version, "accepted")]) == {}  # a late settle is stale
    assert c.confirm_code(db, KEYRING, vid, _code(db, vid, "sms")).result == c.FINISHED  # and it never proves


def test_a_step_whose_send_started_is_left_to_settle_by_a_proof(db):
    vid = _created(db, (("email", "ada@example.com", 0), ("sms", "+14155550100", 0)))
    claimed = {i.channel: i for i in t.claim(db, "w", 10, 30, begin=True)}
    t.start(db, "w", [i.fence for i in claimed.values()])  # both handed to their providers
    t.settle(db, "w", [Settlement(claimed["email"].id, claimed["email"].lease_version, "accepted", provider_ref="m1")])
    nonce = bytes(db.one("SELECT token_nonce FROM verifications WHERE id = :v", v=vid)["token_nonce"])
    assert c.confirm_link(db, KEYRING, KEYRING.primary.link(vid, nonce)).result == c.VERIFIED
    sms = claimed["sms"]
    assert t.settle(db, "w", [Settlement(sms.id, sms.lease_version, "accepted", provider_ref="SM1")]) == {
        sms.id: "accepted"
    }
