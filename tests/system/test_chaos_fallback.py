"""The channel-policy checks of the chaos run (tools/chaos_fallback.py) catch what they are meant to
catch, and pass on a run that behaved. The run itself is tests/system/test_chaos.py's."""

from __future__ import annotations

import sys
import uuid

from signup_verification.outbox import transitions as t
from signup_verification.outbox.transitions import Settlement
from signup_verification.platform.catalogue import catalogue
from signup_verification.verifications import confirm
from support.dispatch import KEYRING, provider_settings
from support.paths import ROOT
from support.policy import create_steps, create_with_fallback, sent
from support.webhooks import events_database

sys.path.insert(0, str(ROOT / "tools"))

import chaos_fallback  # noqa: E402
from chaos_checks import Findings  # noqa: E402
from chaos_faults import Delivered  # noqa: E402


def _secrets(db, vid: uuid.UUID) -> tuple[str, str]:
    nonce = bytes(db.one("SELECT token_nonce FROM verifications WHERE id = :v", v=vid)["token_nonce"])
    return KEYRING.primary.link(vid, nonce), KEYRING.primary.sms_code(vid, nonce, 6)  # the link as sent: id, token


def _run_checks(db, deliveries: list[Delivered]) -> Findings:
    found = Findings()
    primary, fallback = chaos_fallback.split(db, deliveries, KEYRING)
    assert all(d.channel == "email" for d in primary)  # the primaries' messages stay with the main checks
    chaos_fallback.check(db, found, fallback)
    return found


def _fail_primary(db) -> None:
    [claimed] = t.claim(db, "w", 10, 30)
    t.begin_attempts(db, "w", [claimed.fence])
    t.settle(db, "w", [Settlement(claimed.id, claimed.lease_version, "failed", 0, "rejected", "550")])


def test_a_run_that_behaved_passes(db):
    settings = provider_settings().create
    confirmed = create_with_fallback(db, settings, account="a1", email="a1@example.com", phone="+14155550101")
    link, _ = _secrets(db, confirmed)
    assert confirm.confirm_link(db, KEYRING, link).result == confirm.VERIFIED
    failed = create_with_fallback(db, settings, account="a2", email="a2@example.com", phone="+14155550102")
    _fail_primary(db)  # brings the fallback forward...
    [fallback] = t.claim(db, "w", 10, 30)  # ...and the next claim takes it
    t.begin_attempts(db, "w", [fallback.fence])
    t.settle(db, "w", [Settlement(fallback.id, fallback.lease_version, "accepted", provider_ref="SM1")])
    _, code = _secrets(db, failed)
    found = _run_checks(db, [Delivered("sms", "+14155550102", code, 0.0)])
    assert found.ok, dict(found.violations)
    f = found.figures
    assert (
        f["fallback_confirmed_before_due"],
        f["fallback_primary_failed"],
        f["fallback_attempted_primary_failed"],
    ) == (1, 1, 1)


def test_a_fallback_sent_after_the_confirmation_is_caught(db):
    vid = create_with_fallback(db, provider_settings().create)
    link, code = _secrets(db, vid)
    confirm.confirm_link(db, KEYRING, link)
    found = _run_checks(db, [Delivered("sms", "+14155550100", code, 0.0)])  # yet the phone got the code
    assert "fallback_sent_after_confirm" in found.violations


def test_a_failed_primary_whose_fallback_never_went_out_is_caught(db):
    vid = create_with_fallback(db, provider_settings().create, after_seconds=300)
    _fail_primary(db)
    db.run(
        "UPDATE delivery_intents SET brought_forward_at = NULL, next_attempt_at = now() + interval '1 hour'"
        " WHERE verification_id = :v AND role = 'fallback'",
        v=vid,
    )  # as if the hook had not run
    found = _run_checks(db, [])
    assert "fallback_not_attempted" in found.violations


def test_the_proofs_check_passes_a_second_proof_and_catches_a_proof_without_its_event(database_url):
    edb = events_database(database_url)
    try:
        vid = create_with_fallback(edb, provider_settings().create, account="p1", after_seconds=0)
        sent(edb, vid, "sms")
        link, code = _secrets(edb, vid)
        assert confirm.confirm_link(edb, KEYRING, link).result == confirm.VERIFIED
        assert confirm.confirm_code(edb, KEYRING, vid, code).result == confirm.VERIFIED  # the number, too
        found = Findings()
        chaos_fallback.check_proofs(edb, found)
        assert found.ok and found.figures["proofs_second"] == 1, dict(found.violations)
        edb.run(
            "DELETE FROM delivery_intents WHERE verification_id = :v AND event_type = 'verification.proved'"
            " AND event_subject = 'sms'",
            v=vid,
        )
        found = Findings()
        chaos_fallback.check_proofs(edb, found)
        assert set(found.violations) == {"proofs"}, dict(found.violations)
    finally:
        edb.close()


def test_a_third_step_sent_after_a_proof_at_step_2_is_caught_and_one_brought_forward_passes(db):
    settings = provider_settings().create
    proved = create_steps(db, settings, account="s1", key="s1")  # email, sms, whatsapp
    vid = uuid.UUID(proved.verification.verification_id)
    nonce = bytes(db.one("SELECT token_nonce FROM verifications WHERE id = :v", v=vid)["token_nonce"])
    sms_code = KEYRING.primary.code("sms", vid, nonce, 6)
    db.run(
        "UPDATE delivery_intents SET created_at = created_at - interval '61 seconds',"
        " next_attempt_at = next_attempt_at - interval '61 seconds' WHERE verification_id = :v",
        v=vid,
    )  # step 2's time came (60 s), not step 3's (120 s)
    sent(db, vid, "sms")
    sms = Delivered("sms", "+14155550100", sms_code, 0.0)
    assert confirm.confirm_code(db, KEYRING, vid, sms_code).result == confirm.VERIFIED  # step 2 proves first
    whatsapp = Delivered("whatsapp", "+14155550199", KEYRING.primary.code("whatsapp", vid, nonce, 6), 0.0)
    found = _run_checks(db, [sms, whatsapp])  # yet step 3 reached the phone
    assert "fallback_sent_after_confirm" in found.violations
    # a verification whose first two steps failed for good, its third brought forward and sent: sound
    failed = create_steps(db, settings, account="s2", key="s2")
    vid = uuid.UUID(failed.verification.verification_id)
    _fail_primary(db)  # the email: step 2 comes forward
    _fail_primary(db)  # the SMS: step 3 comes forward
    [step3] = t.claim(db, "w", 10, 30)
    t.begin_attempts(db, "w", [step3.fence])
    t.settle(db, "w", [Settlement(step3.id, step3.lease_version, "accepted", provider_ref="SM3")])
    nonce = bytes(db.one("SELECT token_nonce FROM verifications WHERE id = :v", v=vid)["token_nonce"])
    taken = Delivered("whatsapp", "+14155550199", KEYRING.primary.code("whatsapp", vid, nonce, 6), 0.0)
    found = _run_checks(db, [sms, taken])
    assert found.ok, dict(found.violations)
    assert found.figures["fallback_attempted_primary_failed"] == 2


def test_a_code_proof_of_a_step_never_sent_is_caught(db):
    vid = create_with_fallback(db, provider_settings().create, account="u1", after_seconds=0)
    link, _ = _secrets(db, vid)
    assert confirm.confirm_link(db, KEYRING, link).result == confirm.VERIFIED  # the email's link: sound
    found = Findings()
    chaos_fallback.check_proofs(db, found)
    assert found.ok, dict(found.violations)
    # the SMS, suppressed by that proof, proves all the same: the consuming statement run directly
    digest = bytes(db.one("SELECT fallback_digest FROM verifications WHERE id = :v", v=vid)["fallback_digest"])
    assert db.one(catalogue("verifications")["confirm_consume"], id=vid, digest=digest, channel="sms") is not None
    found = Findings()
    chaos_fallback.check_proofs(db, found)
    assert set(found.violations) == {"proof_unsent"}, dict(found.violations)


def test_a_code_proof_of_a_step_whose_every_attempt_reached_no_one_is_caught(db):
    settings = provider_settings().create
    taken = uuid.UUID(create_steps(db, settings, (("sms", "+14155550100", 0),), account="r1", key="r1")
                      .verification.verification_id)  # fmt: skip
    claimed = _begun(db)
    t.settle(db, "w", [Settlement(claimed.id, claimed.lease_version, "accepted", provider_ref="SM1")])
    nonce = bytes(db.one("SELECT token_nonce FROM verifications WHERE id = :v", v=taken)["token_nonce"])
    assert confirm.confirm_code(db, KEYRING, taken, KEYRING.primary.code("sms", taken, nonce, 6)).result == (
        confirm.VERIFIED
    )
    found = Findings()
    chaos_fallback.check_proofs(db, found)
    assert found.ok, dict(found.violations)
    # attempt 1 ambiguous and found absent at Twilio, attempt 2 refused at submission: nobody got the code
    unsent = uuid.UUID(create_steps(db, settings, (("sms", "+14155550111", 0),), account="r2", key="r2")
                       .verification.verification_id)  # fmt: skip
    first = _begun(db)
    t.settle(db, "w", [Settlement(first.id, first.lease_version, "ambiguous", 0, "timeout_after_send", "x")])
    assert t.resolve_by_lookup(db, [(first.id, f"{first.id}:1", None)]) == {first.id: "retryable"}
    second = _begun(db)
    t.settle(db, "w", [Settlement(second.id, second.lease_version, "failed", 0, "invalid_destination", "21211")])
    # its code proves all the same: the consuming statement run directly
    digest = bytes(db.one("SELECT token_digest FROM verifications WHERE id = :v", v=unsent)["token_digest"])
    assert db.one(catalogue("verifications")["confirm_consume"], id=unsent, digest=digest, channel="sms") is not None
    found = Findings()
    chaos_fallback.check_proofs(db, found)
    assert set(found.violations) == {"proof_unsent"} and len(found.violations["proof_unsent"]) == 1, dict(
        found.violations
    )


def _begun(db) -> t.ClaimedIntent:
    [claimed] = t.claim(db, "w", 10, 30)
    assert len(t.begin_attempts(db, "w", [claimed.fence])) == 1
    return claimed
