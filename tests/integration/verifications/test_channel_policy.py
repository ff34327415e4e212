"""One verification, one secret per channel: the email's link and the SMS's code each prove their own
destination, once, and the first verifies it; confirming by either suppresses the other channel's
undelivered intent in the same statement; a newer verification supersedes the older one on every
channel it used. (What each proof records: test_proofs.py.)"""

from __future__ import annotations

import threading
import uuid

from signup_verification.platform.database import Database
from signup_verification.verifications import confirm as c
from signup_verification.verifications.tokens import split_link
from support.dispatch import KEYRING
from support.factories import SETTINGS, created
from support.policy import create_with_fallback, intents, sent

KEY = KEYRING.primary


def link(vid: uuid.UUID, db) -> str:
    nonce = bytes(db.one("SELECT token_nonce FROM verifications WHERE id = :id", id=vid)["token_nonce"])
    return KEY.link(vid, nonce)


def code(vid: uuid.UUID, db) -> str:
    nonce = bytes(db.one("SELECT token_nonce FROM verifications WHERE id = :id", id=vid)["token_nonce"])
    return KEY.sms_code(vid, nonce, 6)


def status(db, vid) -> str:
    return db.one("SELECT status FROM verifications WHERE id = :id", id=vid)["status"]


def test_confirming_the_email_link_first_suppresses_the_sms_fallback_as_verified(db):
    vid = create_with_fallback(db, SETTINGS.create)
    outcome = c.confirm_link(db, KEYRING, link(vid, db))
    assert outcome.result == c.VERIFIED and (outcome.channel, outcome.presented) == ("email", "email")
    assert outcome.destination_hint is not None and "ada" not in outcome.destination_hint[1:]
    fallback = intents(db, vid)["fallback"]
    assert (fallback["status"], fallback["suppression_reason"], fallback["attempts"]) == ("suppressed", "verified", 0)
    # the SMS code was never sent: it proves nothing now, and counts as a wrong code
    assert c.confirm_code(db, KEYRING, vid, code(vid, db)).result == c.FINISHED
    proved = db.one(
        "SELECT verified_channel, second_proof_at, confirm_failures FROM verifications WHERE id = :id", id=vid
    )
    assert (proved["verified_channel"], proved["second_proof_at"], proved["confirm_failures"]) == ("email", None, 1)


def test_the_fallback_sms_code_verifies_and_suppresses_the_undelivered_email(db):
    vid = create_with_fallback(db, SETTINGS.create)
    sent(db, vid, "sms")
    outcome = c.confirm_code(db, KEYRING, vid, code(vid, db))
    assert outcome.result == c.VERIFIED and (outcome.channel, outcome.presented) == ("email", "sms")
    assert outcome.destination_hint.endswith("00") and "555" not in outcome.destination_hint
    primary = intents(db, vid)["primary"]
    assert (primary["status"], primary["suppression_reason"]) == ("suppressed", "verified")
    assert c.confirm_link(db, KEYRING, link(vid, db)).result == c.VERIFIED  # the address, proved now
    assert c.confirm_link(db, KEYRING, link(vid, db)).result == c.ALREADY_VERIFIED


def test_sms_first_with_an_email_fallback_confirms_by_link(db):
    vid = create_with_fallback(db, SETTINGS.create, channel="sms")
    assert c.preview_link(db, KEYRING, link(vid, db)).result == c.PENDING
    assert c.confirm_link(db, KEYRING, link(vid, db)).result == c.VERIFIED
    assert status(db, vid) == "verified"


def test_the_secrets_are_per_channel_and_never_stored(db):
    vid = create_with_fallback(db, SETTINGS.create)
    row = db.one("SELECT token_digest, fallback_digest FROM verifications WHERE id = :id", id=vid)
    assert bytes(row["token_digest"]) == KEY.link_digest(split_link(link(vid, db))[1])  # the token after the id
    assert bytes(row["fallback_digest"]) == KEY.code_digest(vid, code(vid, db))
    dump = repr(db.rows("SELECT * FROM verifications")) + repr(db.rows("SELECT * FROM delivery_intents"))
    assert split_link(link(vid, db))[1] not in dump and code(vid, db) not in dump


def test_without_a_fallback_a_code_still_cannot_confirm_an_email_verification(db):
    vid = created(db, "ada@example.com")
    assert c.confirm_code(db, KEYRING, vid, code(vid, db)).result == c.INVALID
    assert status(db, vid) == "pending"


def test_wrong_codes_on_the_fallback_count_and_lock_every_channel(db):
    vid = create_with_fallback(db, SETTINGS.create)
    right = code(vid, db)
    wrong = f"{(int(right) + 1) % 1_000_000:06d}"
    results = [c.confirm_code(db, KEYRING, vid, wrong).result for _ in range(SETTINGS.create.max_confirm_attempts)]
    assert results[-1] == c.LOCKED and set(results[:-1]) == {c.WRONG_CODE}
    assert {row["status"] for row in intents(db, vid).values()} == {"suppressed"}
    assert c.confirm_link(db, KEYRING, link(vid, db)).result == c.LOCKED


def test_concurrent_link_and_code_each_prove_and_verify_once(db, database_url):
    vid = create_with_fallback(db, SETTINGS.create)
    sent(db, vid, "sms")
    token, sms = link(vid, db), code(vid, db)
    results: list = []
    barrier = threading.Barrier(2)

    def by_link():
        own = Database.from_url(database_url)
        barrier.wait()
        results.append(c.confirm_link(own, KEYRING, token).result)
        own.close()

    def by_code():
        own = Database.from_url(database_url)
        barrier.wait()
        results.append(c.confirm_code(own, KEYRING, vid, sms).result)
        own.close()

    threads = [threading.Thread(target=by_link), threading.Thread(target=by_code)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert results == [c.VERIFIED, c.VERIFIED]  # each secret proved its own destination
    row = db.one("SELECT verified_channel, verified_at, second_proof_at FROM verifications WHERE id = :id", id=vid)
    assert row["verified_channel"] in ("email", "sms") and row["second_proof_at"] >= row["verified_at"]


def test_a_second_proof_whose_transaction_began_before_the_first_proof_committed_is_recorded(db, database_url):
    """The code's statement reads its clock before the link's proof commits (a transaction begun
    earlier stands for a statement that waited on the row): its proof is recorded, never before the
    first one, instead of breaking the proofs' order constraint."""
    vid = create_with_fallback(db, SETTINGS.create)
    sent(db, vid, "sms")
    token, sms = link(vid, db), code(vid, db)
    own = Database.from_url(database_url)
    try:
        with own.transaction():
            own.one("SELECT now()")  # this transaction's clock, before the first proof
            assert c.confirm_link(db, KEYRING, token).result == c.VERIFIED  # committed on another connection
            assert c.confirm_code(own, KEYRING, vid, sms).result == c.VERIFIED
    finally:
        own.close()
    row = db.one("SELECT verified_channel, verified_at, second_proof_at FROM verifications WHERE id = :id", id=vid)
    assert row["verified_channel"] == "email" and row["second_proof_at"] >= row["verified_at"]


def test_a_newer_verification_supersedes_the_older_on_every_channel_it_used(db):
    old = create_with_fallback(db, SETTINGS.create, account="acct-9")  # email + SMS fallback
    created(db, "+14155550101", account="acct-9")
    assert status(db, old) == "superseded"
    assert {(r["status"], r["suppression_reason"]) for r in intents(db, old).values()} == {("suppressed", "superseded")}
    assert c.confirm_link(db, KEYRING, link(old, db)).result == c.SUPERSEDED
    # and a verification with a fallback supersedes an older one whose only channel is its fallback's
    email_only = created(db, "b@example.com", account="acct-8")
    create_with_fallback(db, SETTINGS.create, account="acct-8", channel="sms", phone="+14155550102")
    assert status(db, email_only) == "superseded"


def test_an_older_verification_on_another_channel_only_is_left_alone(db):
    email_only = created(db, "b@example.com", account="acct-7")
    created(db, "+14155550103", account="acct-7")
    assert status(db, email_only) == "pending"
