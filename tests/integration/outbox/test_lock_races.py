"""Statements that change an intent someone else may be changing at the same moment write the attempt
log from the row they locked, not from the statement's snapshot: a claim that commits while a proof
waits for its lock has begun an attempt, and the proof that suppresses the row ends that attempt."""

from __future__ import annotations

import uuid

from signup_verification.outbox import transitions as t
from signup_verification.verifications import confirm as c
from signup_verification.verifications import create as create_domain
from support.dispatch import KEYRING, provider_settings
from support.policy import create_steps
from support.races import held_while

SETTINGS = provider_settings()


def test_a_proof_waiting_on_a_claim_ends_the_attempt_the_claim_began(db, database_url):
    outcome = create_steps(db, SETTINGS.create, (("email", "ada@example.com", 0), ("sms", "+14155550100", 0)))
    assert isinstance(outcome, create_domain.Created), outcome
    vid = uuid.UUID(outcome.verification.verification_id)
    nonce = bytes(db.one("SELECT token_nonce FROM verifications WHERE id = :v", v=vid)["token_nonce"])
    claimed: list[t.ClaimedIntent] = []
    proved: list[c.Outcome] = []

    def claim(on) -> None:  # the fused claim: each row 'attempting', its attempt begun, nothing sent yet
        claimed.extend(t.claim(on, "w", 10, 30, begin=True))

    held_while(
        database_url, claim, lambda: proved.append(c.confirm_link(db, KEYRING, KEYRING.primary.link(vid, nonce)))
    )

    assert [p.result for p in proved] == [c.VERIFIED]
    assert {i.channel for i in claimed} == {"email", "sms"}
    for intent in claimed:
        row = db.one("SELECT status, lease_owner FROM delivery_intents WHERE id = :i", i=intent.id)
        assert row == {"status": "suppressed", "lease_owner": None}
        log = db.rows(
            "SELECT outcome, lease_owner FROM delivery_attempts WHERE intent_id = :i ORDER BY id", i=intent.id
        )
        # the begun attempt ended, under the lease that began it: no attempt is left open
        assert [(r["outcome"], r["lease_owner"]) for r in log] == [("attempting", "w"), ("released", "w")]
        assert t.start(db, "w", [intent.fence]) == []  # and the worker's start is fenced out: nothing sent
