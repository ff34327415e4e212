"""A step's code proves only while its message may have reached the person: a send that was proven
never to have reached the provider (refused at submission, an ambiguous SMS the provider's lookup
found absent) gave the code to nobody, so it is a wrong code until a later attempt of the step is sent.
A send the provider took still counts, even once reported undelivered (a report can be wrong). A step
whose intent ended unsent never will be sent: once every code step did, the code-entry page no longer
asks for a code (`code_entry_url` null) and says the code can no longer be used."""

from __future__ import annotations

import uuid

import pytest

from signup_verification.delivery import reports
from signup_verification.outbox import transitions as t
from signup_verification.outbox.transitions import Settlement
from signup_verification.verifications import confirm as c
from signup_verification.verifications import create as create_domain
from signup_verification.verifications import entry, read
from support.dispatch import KEYRING, provider_settings
from support.policy import create_steps
from support.reports import twilio_form

SETTINGS = provider_settings()
BASE = "https://verify.example.org/confirm"
SMS_ONLY = (("sms", "+14155550100", 0),)


def _created(db, steps) -> uuid.UUID:
    outcome = create_steps(db, SETTINGS.create, steps)
    assert isinstance(outcome, create_domain.Created), outcome
    return uuid.UUID(outcome.verification.verification_id)


def _code(db, vid: uuid.UUID, channel: str) -> str:
    nonce = bytes(db.one("SELECT token_nonce FROM verifications WHERE id = :v", v=vid)["token_nonce"])
    return KEYRING.primary.code(channel, vid, nonce, 6)


def _wrong(code: str) -> str:
    return f"{(int(code) + 1) % 1_000_000:06d}"


def _begun(db, channel: str) -> t.ClaimedIntent:
    """The one eligible intent (it must be on `channel`), claimed and its send handed over."""
    [claimed] = t.claim(db, "w", 10, 30)
    assert claimed.channel == channel
    assert len(t.begin_attempts(db, "w", [claimed.fence])) == 1
    return claimed


def _settled(db, claimed: t.ClaimedIntent, outcome: str, **fields) -> dict[int, str]:
    return t.settle(db, "w", [Settlement(claimed.id, claimed.lease_version, outcome, 0, **fields)])


def _refused(db, channel: str) -> None:
    """Refused for good at submission (Twilio's 400 21211, an invalid number): never taken."""
    claimed = _begun(db, channel)
    assert _settled(db, claimed, "failed", error_class="invalid_destination", error_detail="21211") == {
        claimed.id: "failed"
    }


def _absent(db, channel: str) -> int:
    """Sent, ambiguous (no answer), then looked up at the provider, which has no such message."""
    claimed = _begun(db, channel)
    _settled(db, claimed, "ambiguous", error_class="timeout_after_send", error_detail="no answer")
    found = t.resolve_by_lookup(db, [(claimed.id, f"{claimed.id}:{claimed.attempts + 1}", None)])
    assert set(found) == {claimed.id}
    return claimed.id


def _failures(db, vid: uuid.UUID) -> int:
    return db.one("SELECT confirm_failures FROM verifications WHERE id = :v", v=vid)["confirm_failures"]


def _entry_url(db, vid: uuid.UUID) -> str | None:
    view = read.read(db, KEYRING, BASE, vid)
    assert view is not None
    return view.code_entry_url


def _page(db, vid: uuid.UUID) -> c.Outcome:
    return entry.preview_entry(db, KEYRING, KEYRING.primary.code_entry_handle(vid))


def test_an_ambiguous_sms_the_lookup_found_absent_is_a_wrong_code_until_a_new_attempt_is_sent(db):
    vid = _created(db, SMS_ONLY)
    code = _code(db, vid, "sms")
    intent_id = _absent(db, "sms")  # attempts left: retryable
    assert db.one("SELECT status FROM delivery_intents WHERE id = :i", i=intent_id)["status"] == "retryable"
    absent = c.confirm_code(db, KEYRING, vid, code)
    guess = c.confirm_code(db, KEYRING, vid, _wrong(code))
    assert (absent.result, absent.remaining_attempts, guess.result, guess.remaining_attempts) == (
        c.WRONG_CODE, 4, c.WRONG_CODE, 3
    )  # fmt: skip
    assert _page(db, vid).result == c.PENDING and _entry_url(db, vid)  # it may still be sent
    again = _begun(db, "sms")  # the next attempt is handed over: the provider may deliver it now
    assert again.id == intent_id
    proved = c.confirm_code(db, KEYRING, vid, code)
    assert (proved.result, proved.presented, proved.verified_channel) == (c.VERIFIED, "sms", "sms")


def test_a_step_refused_at_submission_is_a_wrong_code_and_the_next_step_proves(db):
    vid = _created(db, (("sms", "+14155550100", 0), ("voice", "+14155550100", 60)))
    _refused(db, "sms")  # brings the call forward
    refused = c.confirm_code(db, KEYRING, vid, _code(db, vid, "sms"))
    guess = c.confirm_code(db, KEYRING, vid, _wrong(_code(db, vid, "sms")))
    assert (refused.result, refused.presented, refused.remaining_attempts) == (c.WRONG_CODE, "voice", 4)
    assert (guess.result, guess.presented, guess.remaining_attempts) == (c.WRONG_CODE, "voice", 3)  # the same
    assert _page(db, vid).presented == "voice"  # the page asks for the call's code, due now
    _begun(db, "voice")
    proved = c.confirm_code(db, KEYRING, vid, _code(db, vid, "voice"))
    assert (proved.result, proved.verified_channel) == (c.VERIFIED, "voice")
    assert db.one("SELECT status FROM verifications WHERE id = :v", v=vid)["status"] == "verified"


def test_an_accepted_step_reported_undelivered_still_proves_and_the_page_asks_for_its_code(db):
    vid = _created(db, (("sms", "+14155550100", 0), ("voice", "+14155550100", 60)))
    claimed = _begun(db, "sms")
    sid = "SM" + uuid.uuid4().hex
    assert _settled(db, claimed, "accepted", provider_ref=sid) == {claimed.id: "accepted"}
    report = reports.twilio_observation(twilio_form(sid, "undelivered", ErrorCode="30003"))  # handset off
    assert reports.ingest(db, "twilio", [report]).undeliverable == 1  # brings the call forward
    row = db.one("SELECT status, undeliverable_reason FROM delivery_intents WHERE id = :i", i=claimed.id)
    assert row["status"] == "failed" and row["undeliverable_reason"]
    _refused(db, "voice")  # the call is refused: the SMS is the one message the person may hold
    assert _entry_url(db, vid)
    shown = _page(db, vid)
    assert (shown.result, shown.presented) == (c.PENDING, "sms")  # the provider took it: it may have arrived
    proved = c.confirm_code(db, KEYRING, vid, _code(db, vid, "sms"))
    assert (proved.result, proved.verified_channel) == (c.VERIFIED, "sms")


def _exhausted(db, channel: str) -> None:
    """Every attempt of the step ended `retryable` (certainly not sent) until none was left."""
    while True:
        claimed = _begun(db, channel)
        if _settled(db, claimed, "retryable", error_class="rate_limited", error_detail="429") == {claimed.id: "failed"}:
            return


def _absent_to_the_last(db, channel: str) -> None:
    """Ambiguous, then found absent at the provider, with no attempt left."""
    db.run("UPDATE delivery_intents SET max_attempts = 1 WHERE channel = :c", c=channel)
    intent_id = _absent(db, channel)
    assert db.one("SELECT status FROM delivery_intents WHERE id = :i", i=intent_id)["status"] == "failed"


@pytest.mark.parametrize("ended", [_refused, _exhausted, _absent_to_the_last], ids=["refused", "exhausted", "absent"])
def test_code_entry_url_is_null_once_every_code_step_ended_unsent(db, ended):
    vid = _created(db, (("email", "ada@example.com", 0), ("sms", "+14155550100", 0)))
    assert _entry_url(db, vid) is not None  # the SMS is due: its code may still come
    email = t.claim(db, "w", 10, 30)
    t.release(db, "w", [i.fence for i in email])  # only the SMS is worked on below
    db.run("UPDATE delivery_intents SET next_attempt_at = now() + interval '1 hour' WHERE channel = 'email'")
    ended(db, "sms")
    assert db.one("SELECT status FROM verifications WHERE id = :v", v=vid)["status"] == "pending"  # the link may prove
    assert _entry_url(db, vid) is None
    shown = _page(db, vid)
    assert (shown.result, shown.presented) == (c.EXPIRED, "sms")  # no form: the code can no longer be used
    before = _failures(db, vid)
    right = c.confirm_code(db, KEYRING, vid, _code(db, vid, "sms"))
    guess = c.confirm_code(db, KEYRING, vid, _wrong(_code(db, vid, "sms")))
    assert right == guess == c.Outcome(c.FINISHED, presented="sms", locale="en")  # the same answer, and counted
    assert _failures(db, vid) == before + 2
