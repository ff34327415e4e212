"""Three ordered steps in the records: create writes one intent per step in its transaction, each
step's destination counts against its own limits, a final failure brings the next waiting step
forward (a chain), a proof ends the steps not sent yet, and a replay answers the same three steps."""

from __future__ import annotations

import json
import re
import uuid

from signup_verification.operations import timeline as inspect
from signup_verification.outbox import transitions as t
from signup_verification.outbox.transitions import Settlement
from signup_verification.platform.catalogue import catalogue
from signup_verification.verifications import confirm as c
from signup_verification.verifications import create as create_domain
from signup_verification.verifications.abuse import destination_keys
from signup_verification.verifications.read import read
from support.dispatch import KEYRING, provider_settings
from support.policy import THREE_STEPS, create_steps, steps_of
from support.webhooks import events

SETTINGS = provider_settings()


def _created(db, steps=THREE_STEPS, **options) -> uuid.UUID:
    outcome = create_steps(db, SETTINGS.create, steps, **options)
    assert isinstance(outcome, create_domain.Created), outcome
    return uuid.UUID(outcome.verification.verification_id)


def _settle_next(db, outcome: str, channel: str) -> None:
    """Claim the one eligible intent (it must be on `channel`) and settle its attempt as `outcome`."""
    [claimed] = t.claim(db, "w", 10, 30)
    assert claimed.channel == channel
    t.begin_attempts(db, "w", [claimed.fence])
    t.settle(db, "w", [Settlement(claimed.id, claimed.lease_version, outcome, 0, "x", "y")])


def _make_due(db, vid, step: int) -> None:
    db.run(
        "UPDATE delivery_intents SET next_attempt_at = now() - interval '1 second'"
        " WHERE verification_id = :v AND intent_step(verification_id, id) = :step AND role <> 'event'",
        v=vid,
        step=step,
    )


def test_create_writes_each_step_in_its_transaction_and_the_answer_names_them(db):
    outcome = create_steps(db, SETTINGS.create, key="three")
    assert isinstance(outcome, create_domain.Created)
    assert outcome.verification.steps == [
        {"channel": "email", "after_seconds": 0},
        {"channel": "sms", "after_seconds": 60},
        {"channel": "whatsapp", "after_seconds": 120},
    ]
    vid = uuid.UUID(outcome.verification.verification_id)
    steps = steps_of(db, vid)
    assert [(s["step"], s["channel"], s["role"], s["destination"]) for s in steps] == [
        (1, "email", "primary", None),
        (2, "sms", "fallback", "+14155550100"),
        (3, "whatsapp", "fallback", "+14155550199"),
    ]
    assert [round(s["due_after"]) for s in steps] == [0, 60, 120]
    assert [s["after_seconds"] for s in steps] == [60, 60, 120] and steps[2]["policy"] == "fallback"
    row = db.one("SELECT fallback_channel, step3_channel, step3_digest FROM verifications WHERE id = :v", v=vid)
    assert (row["fallback_channel"], row["step3_channel"], len(row["step3_digest"])) == ("sms", "whatsapp", 32)
    events = db.rows("SELECT role, channel FROM create_events WHERE verification_id = :v ORDER BY role", v=vid)
    assert [(e["role"], e["channel"]) for e in events] == [
        ("fallback", "sms"),
        ("primary", "email"),
        ("step3", "whatsapp"),
    ]

    replay = create_steps(db, SETTINGS.create, key="three")
    assert isinstance(replay, create_domain.Replayed) and replay.verification == outcome.verification
    other = create_steps(db, SETTINGS.create, THREE_STEPS[:2], key="three")
    assert isinstance(other, create_domain.KeyReused)
    assert db.run("SELECT count(*) FROM delivery_intents WHERE verification_id = :v", v=vid)[0][0] == 3


def test_a_final_failure_brings_the_next_step_forward_and_so_on_down_the_chain(db):
    vid = _created(db)
    _settle_next(db, "failed", "email")  # step 1 fails for good
    sms, whatsapp = steps_of(db, vid)[1:]
    assert sms["brought_forward_at"] is not None and sms["due_after"] < 60
    assert whatsapp["brought_forward_at"] is None and whatsapp["due_after"] > 119  # not yet: step 2 may still arrive
    _settle_next(db, "failed", "sms")  # step 2 fails for good too
    whatsapp = steps_of(db, vid)[2]
    assert whatsapp["brought_forward_at"] is not None
    assert db.run("SELECT count(*) FROM eligible_delivery_intents WHERE id = :i", i=whatsapp["id"])[0][0] == 1
    found = inspect.timeline(db, vid)  # verifyctl inspect: every step, and why the third is due now
    assert found.step3["why"].startswith("due now: step 2 failed for good")
    assert "the primary failed for good; the whatsapp step 3: due now" in inspect.render(found)
    assert [e.detail for e in found.events if e.kind == "brought forward"] == [
        f"sms fallback (intent {found.fallback['id']}): the step before failed for good",
        f"whatsapp step 3 (intent {found.step3['id']}): the step before failed for good",
    ]


def test_a_step_sent_in_time_is_not_brought_forward_past(db):
    vid = _created(db)
    _settle_next(db, "accepted", "email")
    _make_due(db, vid, 2)
    _settle_next(db, "accepted", "sms")  # step 2 on its delay, accepted
    db.run("UPDATE delivery_intents SET status = 'retryable', completed_at = NULL WHERE verification_id = :v"
           " AND channel = 'email'", v=vid)  # fmt: skip
    _settle_next(db, "failed", "email")  # step 1 fails for good later: step 2 is on its way, step 3 waits
    assert steps_of(db, vid)[2]["brought_forward_at"] is None


def test_the_delay_makes_a_step_due_and_a_proof_at_step_2_ends_step_3(db):
    vid = _created(
        db, (("sms", "+14155550100", 0), ("email", "ada@example.com", 60), ("whatsapp", "+14155550199", 120))
    )
    _settle_next(db, "accepted", "sms")
    _make_due(db, vid, 2)  # its delay passed without a proof
    _settle_next(db, "accepted", "email")
    link = KEYRING.primary.link(vid, bytes(db.run("SELECT token_nonce FROM verifications WHERE id = :v", v=vid)[0][0]))
    proved = c.confirm_link(db, KEYRING, link)
    assert (proved.result, proved.presented, proved.verified_channel) == (c.VERIFIED, "email", "email")
    whatsapp = steps_of(db, vid)[2]
    assert (whatsapp["status"], whatsapp["suppression_reason"], whatsapp["attempts"]) == ("suppressed", "verified", 0)
    _make_due(db, vid, 3)
    assert t.claim(db, "w", 10, 30) == []  # never sent after the proof


def test_each_step_destination_counts_against_its_own_limits(db):
    config = provider_settings(rate_limit_per_hour=1).create
    first = create_steps(db, config, account="a-1")
    assert isinstance(first, create_domain.Created)
    # another account, other first two destinations, the same WhatsApp number as step 3
    steps = (("email", "bob@example.com", 0), ("sms", "+14155550101", 60), ("whatsapp", "+14155550199", 120))
    again = create_steps(db, config, steps, account="a-2")
    assert isinstance(again, create_domain.RateLimited)


def test_a_suppressed_step_3_destination_is_refused_at_its_own_pointer(db):
    keys = destination_keys([k.secret for k in KEYRING.keys], SETTINGS.create.abuse, "whatsapp", "+14155550199")
    db.run(
        "INSERT INTO destination_suppressions (channel, destination_key, reason) VALUES ('whatsapp', :k, 'invalid')",
        k=keys.exact[0],
    )
    refused = create_steps(db, SETTINGS.create)
    assert isinstance(refused, create_domain.Suppressed) and refused.pointer == "#/steps/2/destination"
    assert db.run("SELECT count(*) FROM verifications")[0][0] == 0


_CONSUME = catalogue("verifications")["confirm_consume"]


def test_each_steps_secret_proves_its_own_destination_once_and_every_proof_is_told(edb):
    vid = _created(edb)
    nonce = bytes(edb.run("SELECT token_nonce FROM verifications WHERE id = :v", v=vid)[0][0])
    assert c.confirm_link(edb, KEYRING, KEYRING.primary.link(vid, nonce)).result == c.VERIFIED  # step 1 first
    digests = edb.one("SELECT fallback_digest, step3_digest FROM verifications WHERE id = :v", v=vid)
    # the statement a matched code runs, with the step it matched (confirm.py finds which)
    second = edb.one(_CONSUME, id=vid, digest=bytes(digests["fallback_digest"]), channel="sms")
    assert (second["verified_channel"], second["second_proof_channel"], second["third_proof_at"]) == (
        "email",
        "sms",
        None,
    )
    third = edb.one(_CONSUME, id=vid, digest=bytes(digests["step3_digest"]), channel="whatsapp")
    assert third["third_proof_at"] >= third["second_proof_at"]
    assert edb.one(_CONSUME, id=vid, digest=bytes(digests["step3_digest"]), channel="whatsapp") is None  # once
    # a step's digest proves its own step only
    assert edb.one(_CONSUME, id=vid, digest=bytes(digests["fallback_digest"]), channel="whatsapp") is None
    view = read(edb, KEYRING, "https://app.example.org/confirm", vid)
    assert [(p.channel, p.via) for p in view.proofs] == [("email", "link"), ("sms", "code"), ("whatsapp", "code")]
    proved = [e for e in events(edb, vid) if e["event_type"] == "verification.proved"]
    assert [(e["event_subject"], e["payload"]["proof"]["via"]) for e in proved] == [
        ("email", "link"),
        ("sms", "code"),
        ("whatsapp", "code"),
    ]


def test_the_events_name_each_failed_step_and_delivery_failed_waits_for_the_last(edb):
    vid = _created(edb)
    _settle_next(edb, "failed", "email")
    _settle_next(edb, "failed", "sms")
    assert events(edb, vid) == []  # step 3 is left: no delivery.failed yet
    [whatsapp] = [s for s in steps_of(edb, vid) if s["step"] == 3]
    edb.run(
        "SELECT delivery_failed(ARRAY[CAST(:i AS bigint)], CAST(:r AS jsonb))",
        i=whatsapp["id"],
        r=json.dumps([{"intent_id": whatsapp["id"], "category": "invalid_destination", "fault": "recipient"}]),
    )
    [failed] = [e for e in events(edb, vid) if e["event_type"] == "delivery.failed"]
    assert [(d["step"], d["channel"], d["role"]) for d in failed["payload"]["deliveries"]] == [
        (1, "email", "primary"),
        (2, "sms", "fallback"),
        (3, "whatsapp", "fallback"),
    ]


# -- rows the previous release writes while a rolling deploy still runs it ----------------------------
_NEW_CREATE = catalogue("verifications")["create"]
_OLD_CREATE = re.sub(r",\n    -- step 3: all NULL without one\n.*\)\s*$", ")", _NEW_CREATE, flags=re.S).replace(
    "create_verification_v2(", "create_verification("
)


class _PreviousRelease:
    """The database as the previous release's create calls it: create_verification, no step 3."""

    def __init__(self, db):
        self.db = db

    def run(self, sql: str, **params):
        if sql == _NEW_CREATE:
            sql, params = _OLD_CREATE, {k: v for k, v in params.items() if not k.startswith("step3_")}
        return self.db.run(sql, **params)


def test_two_steps_written_the_previous_way_read_replay_and_prove_as_before(db):
    assert "create_verification(" in _OLD_CREATE and "step3" not in _OLD_CREATE
    two = THREE_STEPS[:2]
    first = create_steps(_PreviousRelease(db), SETTINGS.create, two, key="old")
    assert isinstance(first, create_domain.Created) and first.verification.steps is None
    vid = uuid.UUID(first.verification.verification_id)
    assert [(s["role"], s["channel"]) for s in steps_of(db, vid)] == [("primary", "email"), ("fallback", "sms")]
    replay = create_steps(db, SETTINGS.create, two, key="old")  # this release replays it, the same answer
    assert isinstance(replay, create_domain.Replayed) and replay.verification == first.verification
    # a second proof the previous release recorded: no channel named, the other of the two
    db.run(
        "UPDATE verifications SET status = 'verified', verified_at = now(), verified_channel = 'sms',"
        " verified_via = 'code', second_proof_at = now() WHERE id = :v",
        v=vid,
    )
    view = read(db, KEYRING, "https://app.example.org/confirm", vid)
    assert [(p.channel, p.via) for p in view.proofs] == [("sms", "code"), ("email", "link")]
    nonce = bytes(db.run("SELECT token_nonce FROM verifications WHERE id = :v", v=vid)[0][0])
    again = c.confirm_link(db, KEYRING, KEYRING.primary.link(vid, nonce))
    assert again.result == c.ALREADY_VERIFIED  # proved once: no third proof from a row of two steps
    assert db.run("SELECT third_proof_at, second_proof_channel FROM verifications WHERE id = :v", v=vid) == [
        [None, None]
    ]
