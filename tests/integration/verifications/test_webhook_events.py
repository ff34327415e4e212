"""Each state change writes its webhook event in its own statement, once, and only when
webhooks are on (WEBHOOK_URL set: the session setting in the connection's start-up packet)."""

from __future__ import annotations

import json

from signup_verification.outbox import transitions as t
from signup_verification.outbox.transitions import Settlement
from signup_verification.verifications import confirm as confirmations
from support.dispatch import KEYRING
from support.factories import make_verifications, run
from support.webhooks import events, events_database, link_token, sms_code


def test_the_setting_reaches_the_session_without_a_statement(edb, db):
    setting = "SELECT coalesce(current_setting('signup_verification.webhooks', true), '') = 'on' AS on"
    assert edb.single(setting)["on"] is True
    assert db.single(setting)["on"] is False


def test_confirm_writes_one_verified_and_one_proved_event_which_suppression_leaves_alone(edb):
    [vid] = make_verifications(edb, 1)
    token = link_token(edb, vid)
    assert confirmations.confirm_link(edb, KEYRING, token).result == "verified"
    assert confirmations.confirm_link(edb, KEYRING, token).result != "verified"  # the second one: no new event
    event, proved = events(edb, vid)
    assert event["event_type"] == "verification.verified" and event["status"] == "ready"
    data = event["payload"]
    assert data["verification_id"] == str(vid) and data["status"] == "verified" and data["verified_at"]
    assert data["account_id"] == "acct-email-0" and data["channel"] == "email"
    assert proved["event_type"] == "verification.proved" and proved["event_subject"] == "email"
    assert proved["payload"]["proof"] == {"channel": "email", "via": "link", "at": data["verified_at"]}
    text = json.dumps(data) + json.dumps(proved["payload"])
    assert "example.com" not in text and token not in text  # never the destination or the token
    # the email intent of the verified verification is suppressed; its event is not
    assert (
        edb.single("SELECT status FROM delivery_intents WHERE verification_id = :v AND role = 'primary'", v=vid)[
            "status"
        ]
        == "suppressed"
    )
    run(edb)  # the reconciler's dead sweep leaves them too, and finishes (they are not taken for dead work)
    assert {e["status"] for e in events(edb, vid)} == {"ready"}


def test_without_webhook_url_no_event_is_written(db):
    [vid] = make_verifications(db, 1)
    assert confirmations.confirm_link(db, KEYRING, link_token(db, vid)).result == "verified"
    assert events(db) == []


def test_the_wrong_code_that_locks_writes_the_locked_event(edb):
    [vid] = make_verifications(edb, 1, channel="sms")
    right = sms_code(edb, vid)
    wrong = "000000" if right != "000000" else "111111"
    for _ in range(4):
        assert confirmations.confirm_code(edb, KEYRING, vid, wrong).result == "wrong_code"
    assert events(edb, vid) == []
    assert confirmations.confirm_code(edb, KEYRING, vid, wrong).result == "locked"
    [event] = events(edb, vid)
    assert event["event_type"] == "verification.locked" and event["payload"]["status"] == "locked"


def test_the_expiry_sweep_writes_the_expired_event(edb):
    ids = make_verifications(edb, 3)
    edb.run(
        "UPDATE verifications SET created_at = now() - interval '1 hour', expires_at = now() - interval '1 second'"
        " WHERE id = ANY(:ids)",
        ids=ids[:2],
    )
    run(edb)
    got = {e["verification_id"]: e for e in events(edb)}
    assert set(got) == set(ids[:2])
    assert all(e["event_type"] == "verification.expired" and e["payload"]["status"] == "expired" for e in got.values())
    run(edb)  # once per verification, whatever the reruns
    assert len(events(edb)) == 2


def _fail_for_good(db, owner="w"):
    claimed = [c for c in t.claim(db, owner, 100, 30) if not c.is_event]
    t.begin_attempts(db, owner, [c.fence for c in claimed])
    return t.settle(db, owner, [Settlement(c.id, c.lease_version, "failed", error_class="invalid") for c in claimed])


def test_delivery_failed_once_no_message_channel_is_left(edb):
    [vid] = make_verifications(edb, 1)
    assert list(_fail_for_good(edb).values()) == ["failed"]
    [event] = events(edb, vid)
    assert event["event_type"] == "delivery.failed"
    assert event["payload"]["failed_channels"] == ["email"] and event["payload"]["status"] == "pending"


def test_no_delivery_failed_while_another_message_channel_is_left(edb):
    [vid] = make_verifications(edb, 1)
    # a second message intent of the same verification (fallback shape), still ready later
    edb.run(
        "INSERT INTO delivery_intents (verification_id, channel, role, purpose, locale, template_version,"
        " next_attempt_at) SELECT verification_id, 'sms', 'fallback', purpose, locale, template_version,"
        " now() + interval '1 hour' FROM delivery_intents WHERE verification_id = :v",
        v=vid,
    )
    _fail_for_good(edb)
    assert events(edb, vid) == []


def test_a_failed_event_is_not_a_failed_delivery(edb):
    [vid] = make_verifications(edb, 1)
    confirmations.confirm_link(edb, KEYRING, link_token(edb, vid))
    claimed = t.claim(edb, "w", 10, 30)
    failed = [c for c in claimed if c.is_event]
    t.begin_attempts(edb, "w", [event.fence for event in failed])
    t.settle(edb, "w", [Settlement(e.id, e.lease_version, "failed", error_class="rejected") for e in failed])
    assert [e["event_type"] for e in events(edb, vid)] == ["verification.verified", "verification.proved"]


def test_redact_and_purge_handle_a_verification_with_an_event(edb):
    [vid] = make_verifications(edb, 1)
    confirmations.confirm_link(edb, KEYRING, link_token(edb, vid))
    edb.run("UPDATE verifications SET created_at = now() - interval '40 days' WHERE id = :v", v=vid)
    run(edb)  # its event is not delivered yet: nothing is redacted
    assert edb.single("SELECT destination IS NOT NULL AS kept FROM verifications WHERE id = :v", v=vid)["kept"]
    claimed = t.claim(edb, "w", 10, 30)
    t.begin_attempts(edb, "w", [c.fence for c in claimed])
    t.settle(edb, "w", [Settlement(c.id, c.lease_version, "accepted") for c in claimed])
    run(edb)
    assert edb.single("SELECT redacted_at IS NOT NULL AS done FROM verifications WHERE id = :v", v=vid)["done"]


def test_two_channels_failing_in_concurrent_transactions_record_delivery_failed_once(edb, database_url):
    """Policy `both` under two dispatchers: the email and the SMS of one verification fail for good in
    two transactions at the same time. Each alone still sees the other in flight; delivery_failed
    serialises them on the verification, so the second sees the first's commit and records the event."""
    import threading

    [vid] = make_verifications(edb, 1)
    edb.run(
        "INSERT INTO delivery_intents (verification_id, channel, role, purpose, locale, template_version)"
        " SELECT verification_id, 'sms', 'fallback', purpose, locale, template_version FROM delivery_intents"
        " WHERE verification_id = :v",
        v=vid,
    )
    claimed = [c for c in t.claim(edb, "w", 100, 30) if not c.is_event]
    assert len(claimed) == 2
    t.begin_attempts(edb, "w", [c.fence for c in claimed])
    email, sms = sorted(claimed, key=lambda c: c.channel)
    first, second = events_database(database_url), events_database(database_url)
    done = threading.Event()

    def settle_sms() -> None:
        t.settle(second, "w", [Settlement(sms.id, sms.lease_version, "failed", error_class="invalid")])
        done.set()

    try:
        with first.transaction():
            t.settle(first, "w", [Settlement(email.id, email.lease_version, "failed", error_class="invalid")])
            other = threading.Thread(target=settle_sms)
            other.start()
            assert not done.wait(1.0)  # waits on the verification the first transaction holds
        other.join(10)
        assert done.is_set()
    finally:
        first.close()
        second.close()
    assert [e["event_type"] for e in events(edb, vid)] == ["delivery.failed"]
