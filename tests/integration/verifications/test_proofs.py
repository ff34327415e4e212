"""Each secret proves its own destination, once: the email's link the address, the SMS code the
number. The first proof verifies; the other channel's secret, used later but before expiry, is recorded
too. What a secret hears is about that secret: "already" only when it proved before. Dead
verifications keep refusing, and guessing codes after the verification costs the same tries."""

from __future__ import annotations

import json
import threading
import uuid

import pytest

from signup_verification.api import confirm as confirm_edge
from signup_verification.platform.database import Database
from signup_verification.verifications import confirm as c
from signup_verification.verifications import read
from support.dispatch import KEYRING
from support.factories import SETTINGS
from support.policy import create_with_fallback, sent
from support.webhooks import events, events_database, link_token, sms_code

LINK_BASE = SETTINGS.create.link_base


def wrong(code: str) -> str:
    return f"{(int(code) + 1) % 1_000_000:06d}"


def row(db, vid) -> dict:
    return db.one(
        "SELECT status, verified_channel, second_proof_at, confirm_failures FROM verifications WHERE id = :id", id=vid
    )


def proofs(db, vid) -> list[tuple[str, str, str]]:
    view = read.read(db, KEYRING, LINK_BASE, vid)
    assert view is not None
    return [(p.channel, p.via, p.destination) for p in view.proofs]


def test_after_the_sms_code_the_email_link_proves_the_address_it_was_not_yet(db):
    vid = create_with_fallback(db, SETTINGS.create)
    sent(db, vid, "sms")
    assert c.confirm_code(db, KEYRING, vid, sms_code(db, vid)).result == c.VERIFIED
    assert proofs(db, vid) == [("sms", "code", "+1******0100")]
    token = link_token(db, vid)
    shown = c.preview_link(db, KEYRING, token)
    assert shown.result == c.PENDING and shown.destination_hint == "a***@example.com"  # the Confirm page, no tick
    proved = c.confirm_link(db, KEYRING, token)
    assert proved.result == c.VERIFIED and proved.proof is not None and proved.proof.channel == "email"
    assert (proved.verified_channel, proved.verified_via) == ("sms", "code")  # the first proof stays the first
    assert proofs(db, vid) == [("sms", "code", "+1******0100"), ("email", "link", "a***@example.com")]
    again = c.confirm_link(db, KEYRING, token)
    assert again.result == c.ALREADY_VERIFIED and again.proof == proved.proof


def test_after_the_link_the_code_proves_the_number_once(db):
    vid = create_with_fallback(db, SETTINGS.create, after_seconds=0)
    sent(db, vid, "sms")
    assert c.confirm_link(db, KEYRING, link_token(db, vid)).result == c.VERIFIED
    code = sms_code(db, vid)
    assert c.confirm_code(db, KEYRING, vid, code).result == c.VERIFIED
    assert c.confirm_code(db, KEYRING, vid, code).result == c.ALREADY_VERIFIED
    assert [p[0] for p in proofs(db, vid)] == ["email", "sms"] and row(db, vid)["verified_channel"] == "email"


def test_wrong_codes_after_the_verification_cost_the_same_tries_and_then_the_code_proves_nothing(db):
    vid = create_with_fallback(db, SETTINGS.create, after_seconds=0)
    sent(db, vid, "sms")
    assert c.confirm_link(db, KEYRING, link_token(db, vid)).result == c.VERIFIED
    code = sms_code(db, vid)
    tries = [c.confirm_code(db, KEYRING, vid, wrong(code)) for _ in range(SETTINGS.create.max_confirm_attempts)]
    assert [t.result for t in tries] == [c.WRONG_CODE] * len(tries) and tries[-1].remaining_attempts == 0
    assert c.confirm_code(db, KEYRING, vid, code).result == c.FINISHED  # the right one, too late
    state = row(db, vid)
    assert state["status"] == "verified" and state["second_proof_at"] is None  # still verified, by the link only
    assert state["confirm_failures"] == SETTINGS.create.max_confirm_attempts  # the right one is no wrong try
    assert [p[0] for p in proofs(db, vid)] == ["email"]


def test_the_numbers_daily_budget_stops_a_later_proof_too(db):
    vid = create_with_fallback(db, SETTINGS.create, after_seconds=0)
    sent(db, vid, "sms")
    assert c.confirm_link(db, KEYRING, link_token(db, vid)).result == c.VERIFIED
    db.run("UPDATE verifications SET confirm_failures = 3 WHERE id = :id", id=vid)
    refused = c.confirm_code(db, KEYRING, vid, sms_code(db, vid), failures_per_day=3)
    assert (
        refused.result == c.FINISHED
        and row(db, vid)["status"] == "verified"
        and row(db, vid)["second_proof_at"] is None
    )


@pytest.mark.parametrize("first", ["code", "link"])
def test_after_expiry_the_other_secret_proves_nothing_and_says_so(db, first):
    vid = create_with_fallback(db, SETTINGS.create, after_seconds=0)
    sent(db, vid, "sms")
    token, code = link_token(db, vid), sms_code(db, vid)
    if first == "code":
        assert c.confirm_code(db, KEYRING, vid, code).result == c.VERIFIED
    else:
        assert c.confirm_link(db, KEYRING, token).result == c.VERIFIED
    db.run(
        "UPDATE verifications SET created_at = now() - interval '1 hour', expires_at = now() - interval '1 s',"
        " verified_at = now() - interval '30 minutes' WHERE id = :id",
        id=vid,
    )
    if first == "code":
        assert c.preview_link(db, KEYRING, token).result == c.EXPIRED  # never "already confirmed"
        assert c.confirm_link(db, KEYRING, token).result == c.EXPIRED
        assert c.confirm_code(db, KEYRING, vid, code).result == c.ALREADY_VERIFIED  # its own proof
    else:
        assert c.confirm_code(db, KEYRING, vid, code).result == c.FINISHED
        assert c.confirm_link(db, KEYRING, token).result == c.ALREADY_VERIFIED
    assert len(proofs(db, vid)) == 1 and row(db, vid)["second_proof_at"] is None


def test_superseded_and_locked_verifications_keep_refusing_every_secret(db):
    old = create_with_fallback(db, SETTINGS.create, account="acct-s")
    create_with_fallback(db, SETTINGS.create, account="acct-s", email="b@example.com", phone="+14155550109")
    assert c.confirm_link(db, KEYRING, link_token(db, old)).result == c.SUPERSEDED
    assert c.confirm_code(db, KEYRING, old, sms_code(db, old)).result == c.FINISHED
    locked = create_with_fallback(db, SETTINGS.create, account="acct-l", email="l@example.com", phone="+14155550108")
    code = sms_code(db, locked)
    for _ in range(SETTINGS.create.max_confirm_attempts):
        c.confirm_code(db, KEYRING, locked, wrong(code))
    assert c.confirm_link(db, KEYRING, link_token(db, locked)).result == c.LOCKED
    assert c.confirm_code(db, KEYRING, locked, code).result == c.FINISHED
    assert proofs(db, old) == [] and proofs(db, locked) == []


def test_two_presses_of_the_second_link_record_one_proof(db, database_url):
    vid = create_with_fallback(db, SETTINGS.create)
    sent(db, vid, "sms")
    assert c.confirm_code(db, KEYRING, vid, sms_code(db, vid)).result == c.VERIFIED
    token = link_token(db, vid)
    results: list = []
    barrier = threading.Barrier(2)

    def press():
        own = Database.from_url(database_url)
        barrier.wait()
        results.append(c.confirm_link(own, KEYRING, token).result)
        own.close()

    threads = [threading.Thread(target=press) for _ in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert sorted(results) == sorted([c.VERIFIED, c.ALREADY_VERIFIED])


def test_each_proof_is_one_verification_proved_event_and_the_first_one_verified_event(database_url):
    edb = events_database(database_url)
    try:
        vid = create_with_fallback(edb, SETTINGS.create, account=f"acct-{uuid.uuid4().hex[:6]}")
        sent(edb, vid, "sms")
        assert c.confirm_code(edb, KEYRING, vid, sms_code(edb, vid)).result == c.VERIFIED
        assert c.confirm_link(edb, KEYRING, link_token(edb, vid)).result == c.VERIFIED
        c.confirm_link(edb, KEYRING, link_token(edb, vid))  # again: nothing new
        found = [(e["event_type"], e["event_subject"]) for e in events(edb, vid)]
        assert found == [
            ("verification.verified", None),
            ("verification.proved", "sms"),
            ("verification.proved", "email"),
        ]
        by_subject = {e["event_subject"]: e["payload"] for e in events(edb, vid) if e["event_subject"]}
        assert by_subject["email"]["proof"]["via"] == "link" and by_subject["sms"]["proof"]["via"] == "code"
        assert by_subject["email"]["verified_channel"] == "sms"  # the first proof, as everywhere
        assert by_subject["email"]["proof"]["at"] > by_subject["sms"]["proof"]["at"]
    finally:
        edb.close()


def test_the_confirm_answer_names_its_fields_as_the_read_api(db):
    vid = create_with_fallback(db, SETTINGS.create)
    sent(db, vid, "sms")
    status, body = _json(c.confirm_code(db, KEYRING, vid, sms_code(db, vid)))
    assert status == 200 and body["channel"] == "email"  # the primary channel, as the read API says
    assert (body["verified_channel"], body["verified_via"], body["already_verified"]) == ("sms", "code", False)
    assert body["proof"]["channel"] == "sms" and body["proof"]["destination"] == "+1******0100"
    _, later = _json(c.confirm_link(db, KEYRING, link_token(db, vid)))
    assert later["proof"]["channel"] == "email" and later["already_verified"] is False
    assert later["verified_channel"] == "sms" and [p["channel"] for p in later["proofs"]] == ["sms", "email"]
    view = read.read(db, KEYRING, LINK_BASE, vid)
    assert view is not None and later["proofs"] == view.as_json()["proofs"]
    assert later["verified_at"] == view.verified_at


def _json(outcome: c.Outcome) -> tuple[int, dict]:
    text, status, _ = confirm_edge.json_answer(outcome)
    return status, json.loads(text)
