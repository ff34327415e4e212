"""`verifyctl inspect`, `verifyctl status` and `verifyctl reconcile` against a real PostgreSQL."""

from __future__ import annotations

import json

from signup_verification import cli
from signup_verification.operations import timeline as inspect
from signup_verification.outbox import transitions as t
from signup_verification.outbox.transitions import Settlement
from signup_verification.verifications.tokens import Keyring
from support.factories import expire_leases, make_verifications, run
from support.paths import TEST_TOKEN_KEYS


def _token_of(db, verification_id) -> str:
    row = db.one("SELECT key_id, token_nonce FROM verifications WHERE id = :id", id=verification_id)
    return Keyring.parse(TEST_TOKEN_KEYS).get(row["key_id"]).link(verification_id, row["token_nonce"])


def test_inspect_tells_the_story_of_one_delivery(db):
    [vid] = make_verifications(db, 1)
    [first] = t.claim(db, "worker-a", 1, 30)
    t.begin_attempts(db, "worker-a", [first.fence])
    expire_leases(db)  # worker-a died mid-send
    run(db)
    db.run("UPDATE delivery_intents SET next_attempt_at = now() - interval '1 second'")
    run(db)  # hold over: retryable
    [second] = t.claim(db, "worker-b", 1, 30)
    t.begin_attempts(db, "worker-b", [second.fence])
    t.settle(db, "worker-b", [Settlement(second.id, second.lease_version, "accepted", provider_ref="msg-42")])
    db.run("UPDATE verifications SET status = 'verified', verified_at = now()")

    found = inspect.timeline(db, vid)
    assert [e.kind for e in found.events] == [
        "intended",
        "claimed",
        "attempted",
        "observed",
        "claimed",
        "attempted",
        "observed",
        "verified",
    ]
    observed = [e.detail for e in found.events if e.kind == "observed"]
    assert observed == [
        f"attempt 1 (id {first.id}:1) ambiguous; lease_lost: lease expired while attempting",
        f"attempt 2 (id {first.id}:2) accepted; provider ref msg-42",
    ]
    text = inspect.render(found)
    assert "u***@example.com" in text and "worker-a" in text and "status verified" in text
    assert "user0.acct@example.com" not in text and _token_of(db, vid) not in text
    assert json.loads(json.dumps(found.as_json()))["verification"]["destination"] == "u***@example.com"


def test_inspect_masks_addresses_quoted_in_provider_errors(db):
    [vid] = make_verifications(db, 1)
    [c] = t.claim(db, "w", 1, 30)
    t.begin_attempts(db, "w", [c.fence])
    t.settle(
        db, "w", [Settlement(c.id, c.lease_version, "failed", 0, "smtp_5xx", "550 <user0.acct@example.com> unknown")]
    )
    text = inspect.render(inspect.timeline(db, vid))
    assert "user0.acct@example.com" not in text and "550 <u***@example.com> unknown" in text


def test_verifyctl_inspect_status_and_reconcile(service_env, db, capsys):
    [vid] = make_verifications(db, 1)
    assert cli.main(["inspect", str(vid)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"verification {vid}  email  u***@example.com  status pending")

    assert cli.main(["inspect", "00000000-0000-0000-0000-000000000000"]) == 1
    assert "no verification" in capsys.readouterr().err
    assert cli.main(["inspect", "nope"]) == 1

    assert cli.main(["reconcile", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["drained"] is True and report["moves"]["claims_expired"] == 0

    assert cli.main(["status"]) == 0
    table = capsys.readouterr().out
    header = next(line for line in table.splitlines() if line.startswith("channel"))
    assert "ready" in header and "oldest ready" in header and "ambiguous" in header
    email = next(line for line in table.splitlines() if line.startswith("email"))
    assert email.split()[1] == "1"  # one ready
    assert "reconcile:test" in table and "alerts: none" in table

    db.run("UPDATE delivery_intents SET next_attempt_at = now() - interval '10 minutes'")
    assert cli.main(["status", "--check"]) == cli.EXIT_ALERT == 3  # not argparse's usage error (2)
    assert "ALERTS" in capsys.readouterr().out
    assert cli.main(["status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["channels"]["email"]["ready_count"] == 1


def test_a_delivery_that_failed_for_good_says_so_and_promises_nothing(db):
    """A pending verification whose only delivery failed: no "next attempt", no billed segments,
    and the header says nobody will receive it."""
    [vid] = make_verifications(db, 1)
    [c] = t.claim(db, "w", 1, 30)
    t.begin_attempts(db, "w", [c.fence])
    t.settle(
        db,
        "w",
        [Settlement(c.id, c.lease_version, "failed", 0, "recipient_rejected", "550 5.1.1 no such user", segments=1)],
    )
    found = inspect.timeline(db, vid)
    text = inspect.render(found)
    header = text.splitlines()[0]
    assert "status pending (delivery failed for good" in header and "new verification" in header
    assert "next attempt" not in text and "segment" not in text
    assert f"attempt 1 (id {c.id}:1) failed; recipient_rejected: 550 5.1.1 no such user" in text
    assert found.as_json()["delivery_note"].startswith("delivery failed for good")


def test_a_waiting_delivery_shows_its_next_attempt(db):
    [vid] = make_verifications(db, 1)
    text = inspect.render(inspect.timeline(db, vid))
    assert "status ready" in text and "next attempt 20" in text
    assert "(delivery" not in text.splitlines()[0]


# -- a verification with a channel policy -----------------------------------------------------
def test_inspect_shows_both_deliveries_and_why_the_fallback_was_not_sent(db):
    from signup_verification.verifications import confirm
    from support.factories import KEYRING, SETTINGS
    from support.policy import create_with_fallback

    vid = create_with_fallback(db, SETTINGS.create, after_seconds=30)
    waiting = inspect.timeline(db, vid)
    assert waiting.fallback["why"].startswith("waiting: due ") and "30 s after create" in waiting.fallback["why"]
    assert confirm.confirm_link(db, KEYRING, _token_of(db, vid)).result == confirm.VERIFIED
    found = inspect.timeline(db, vid)
    assert found.intent is not None and found.fallback["channel"] == "sms"
    assert found.fallback["why"].startswith("not sent: the verification was confirmed first (by the other channel)")
    text = inspect.render(found)
    assert "fallback" in text and "+1******0100" in text and "a***@example.com" in text
    assert "+14155550100" not in text and "ada@example.com" not in text
    kinds = [e.kind for e in found.events]
    assert kinds.count("intended") == 2 and "suppressed" in kinds and "verified" in kinds
    assert json.loads(json.dumps(found.as_json()))["fallback"]["why"] == found.fallback["why"]


def test_inspect_says_a_failed_primary_brought_the_fallback_forward(db):
    from support.factories import SETTINGS
    from support.policy import create_with_fallback

    vid = create_with_fallback(db, SETTINGS.create, after_seconds=300)
    [c] = t.claim(db, "w", 10, 30)
    t.begin_attempts(db, "w", [c.fence])
    t.settle(db, "w", [Settlement(c.id, c.lease_version, "failed", 0, "rejected", "550 no such user")])
    found = inspect.timeline(db, vid)
    assert found.fallback["why"].startswith("due now: the primary failed for good at ")
    assert "brought forward" in [e.kind for e in found.events]
    assert inspect.delivery_note(found.verification, found.intent, found.fallback).startswith(
        "the primary failed for good; the sms fallback: due now"
    )
    [f] = t.claim(db, "w", 10, 30)
    t.begin_attempts(db, "w", [f.fence])
    t.settle(db, "w", [Settlement(f.id, f.lease_version, "accepted", provider_ref="SM1")])
    assert inspect.timeline(db, vid).fallback["why"].startswith("sent: the primary failed for good")
