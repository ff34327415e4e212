"""`verifyctl suppression list|clear`: a hard bounce refuses creates to that exact address until an
operator clears it, by destination, through the same exact-address digest create uses."""

from __future__ import annotations

import base64
import json

import pytest

from signup_verification import cli
from signup_verification.api import create as create_edge
from signup_verification.api.models import CreateVerificationRequest
from signup_verification.api.problems import Problem
from signup_verification.delivery import reports
from signup_verification.outbox.config import FailurePolicy
from support.factories import KEYRING, SETTINGS, create, deliver


def verifyctl(service_env, capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def bounce(db, suppress_days=None):
    [intent_id] = deliver(db)
    event = reports.Observation(dedup_key=f"ev-{intent_id}", event="bounce", intent_id=intent_id,
                                attempt_id=f"{intent_id}:1", detail="bounce 5.1.1", permanent=True,
                                fault="recipient", category="bounced", code="5.1.1")  # fmt: skip
    return reports.ingest(db, "sendgrid", [event], FailurePolicy(suppress_days=suppress_days))


def test_list_then_clear_the_exact_address_lets_create_through(service_env, db, capsys):
    create(db, "ada.lovelace@gmail.com", key="k1")
    assert bounce(db).suppressed == 1
    code, out, _ = verifyctl(service_env, capsys, "suppression", "list", "--json")
    [entry] = json.loads(out.strip().splitlines()[-1])  # (log records may share stdout after other tests)
    assert code == 0 and entry["channel"] == "email" and entry["expires_at"] is None
    assert entry["kind"] == "exact" and entry["category"] == "bounced"
    assert "ada" not in out and "gmail" not in out  # keys, never destinations
    with pytest.raises(Problem) as refused:
        create(db, "ada.lovelace@GMAIL.com", key="k2")  # the same mailbox: the domain's case never matters
    assert refused.value.status == 422
    # another mailbox name of the same inbox is not the address that bounced: neither blocked nor cleared
    assert create(db, "adalovelace+signup@googlemail.com", key="k-alias").status == 201
    code, out, _ = verifyctl(service_env, capsys, "suppression", "clear", "adalovelace@gmail.com")
    assert code == 1 and out.strip().splitlines()[-1] == "no such suppression"
    code, out, _ = verifyctl(service_env, capsys, "suppression", "clear", "ada.lovelace@gmail.com")
    assert code == 0 and "cleared: the destination" in out
    assert create(db, "ada.lovelace@gmail.com", key="k3").status == 201


def test_a_suppression_period_expires_by_itself(service_env, db, capsys):
    create(db, "grace@example.com", key="k1")
    bounce(db, suppress_days=1)
    db.run("UPDATE destination_suppressions SET expires_at = now() - interval '1 second'")
    assert create(db, "grace@example.com", key="k2").status == 201
    assert (
        verifyctl(service_env, capsys, "suppression", "list")[1].strip().splitlines()[-1]
        == "no destination is suppressed"
    )


def test_the_list_says_until_when_each_entry_refuses_and_its_key_clears_it(service_env, db, capsys):
    """An entry in force reads as in force: its end (SUPPRESSION_DAYS) or "until cleared"; the key the
    text shows (its first 12 digits) is the one `clear --key` takes."""
    create(db, "forever@example.com", key="k1")
    bounce(db)
    create(db, "aweek@example.com", key="k2")
    bounce(db, suppress_days=7)
    code, out, _ = verifyctl(service_env, capsys, "suppression", "list")
    lines = out.strip().splitlines()  # (log records may share stdout after other tests)
    lines = lines[next(i for i, line in enumerate(lines) if line.startswith("2 destination(s) refused by create")) :]
    assert code == 0 and "refused until" in lines[1]
    week, forever = lines[2], lines[3]  # newest first
    listed = json.loads(verifyctl(service_env, capsys, "--json", "suppression", "list")[1].strip().splitlines()[-1])
    [expires] = [e["expires_at"] for e in listed if e["expires_at"]]
    assert expires in week and "until cleared (no expiry)" in forever
    assert "cleared by" not in out  # nothing here was cleared: both still refuse
    key = forever.split()[1]
    assert len(key) == 12
    code, out, _ = verifyctl(service_env, capsys, "suppression", "clear", "--key", key, "--channel", "email")
    assert code == 0 and "cleared: the destination" in out
    assert create(db, "forever@example.com", key="k3").status == 201
    with pytest.raises(Problem):
        create(db, "aweek@example.com", key="k4")


def test_a_key_prefix_two_entries_share_clears_neither(service_env, db, capsys):
    for last in ("01", "02"):
        db.run("INSERT INTO destination_suppressions (channel, destination_key, reason) "
               "VALUES ('sms', decode(:key, 'hex'), 'invalid_destination 30005')", key="aabbccdd" + "00" * 27 + last)  # fmt: skip
    code, _, err = verifyctl(service_env, capsys, "suppression", "clear", "--key", "AABBCCDD", "--channel", "sms")
    assert code == 1 and "starts 2 keys: give more of its digits" in err and err.count("\n") == 1
    assert db.run("SELECT count(*) FROM destination_suppressions")[0][0] == 2
    code, _, _ = verifyctl(service_env, capsys, "suppression", "clear", "--key", "aabbccdd" + "00" * 27 + "02",
                           "--channel", "sms")  # fmt: skip
    assert code == 0 and db.run("SELECT count(*) FROM destination_suppressions")[0][0] == 1


@pytest.mark.parametrize(
    "argv, message",
    [
        (["suppression", "clear"], "give the destination"),
        (["suppression", "clear", "not-an-address@"], "not a valid email destination"),
        (["suppression", "clear", "--key", "zz", "--channel", "sms"], "--key must be the hex key"),
        (["suppression", "clear", "--key", "00ff", "--channel", "sms"], "at least 8 of its digits"),
        (["suppression", "clear", "--key", "00ff00ff"], "--key needs --channel"),
    ],
)
def test_bad_input_is_one_line(service_env, db, capsys, argv, message):
    code, _, err = verifyctl(service_env, capsys, *argv)
    assert code == 1 and err.startswith("verifyctl: ") and message in err and err.count("\n") == 1


def test_a_token_key_rotation_lifts_no_suppression(service_env, db, capsys, monkeypatch):
    """Review: entries are digests under the key that signed when they were written; after a TOKEN_KEYS
    rotation (a new key first, the old one kept) create still refuses the address and `clear` by
    destination still finds the entry."""
    from signup_verification import runtime
    from signup_verification.verifications.tokens import Keyring
    from support.paths import TEST_TOKEN_KEYS

    create(db, "rotated@example.com", key="k1")
    assert bounce(db).suppressed == 1
    rotated = "test-k2:" + base64.urlsafe_b64encode(b"n" * 32).decode().rstrip("=") + "," + TEST_TOKEN_KEYS
    ring = Keyring.parse(rotated)
    assert ring.primary.key_id == "test-k2"
    with pytest.raises(Problem) as refused:
        create(db, "rotated@example.com", account="acct-rot", key="k2", keyring=ring)
    assert refused.value.status == 422 and refused.value.errors[0]["pointer"] == "#/destination"
    monkeypatch.setenv("TOKEN_KEYS", rotated)
    runtime.reset()
    code, out, _ = verifyctl(service_env, capsys, "suppression", "clear", "rotated@example.com")
    assert code == 0 and "cleared: the destination" in out
    assert create(db, "rotated@example.com", account="acct-rot", key="k3", keyring=ring).status == 201


def test_a_suppressed_fallback_destination_is_named_as_the_fallback(service_env, db):
    """The 422 points at the field that holds the suppressed address."""
    create(db, "bounced@example.com", key="k1")
    assert bounce(db).suppressed == 1
    request = CreateVerificationRequest.model_validate(
        {
            "account_id": "acct-fb",
            "channel": "sms",
            "destination": "+14155550123",
            "fallback": {"channel": "email", "destination": "bounced@example.com", "after_seconds": 30},
        }
    )
    with pytest.raises(Problem) as refused:
        create_edge.create_verification(db, SETTINGS.create, KEYRING, request, "k2")
    assert refused.value.status == 422 and refused.value.errors[0]["pointer"] == "#/fallback/destination"
    assert db.one("SELECT count(*) AS n FROM verifications WHERE account_id = 'acct-fb'")["n"] == 0


def test_the_suppression_answer_comes_after_the_callers_own_limits(service_env, db):
    """`422 destination-suppressed` must not be an oracle for a caller the rate limits would stop: a
    rate-limited caller hears 429 whatever the list holds; once the limit frees, the list answers."""
    import dataclasses

    spaced = dataclasses.replace(SETTINGS.create, rate_limit_spacing_seconds=60)
    request = CreateVerificationRequest(account_id="acct-again", channel="email", destination="again@example.com")
    assert create_edge.create_verification(db, spaced, KEYRING, request, "k1").status == 201
    assert bounce(db).suppressed == 1
    with pytest.raises(Problem) as limited:
        create_edge.create_verification(db, spaced, KEYRING, request, "k2")
    assert limited.value.status == 429 and limited.value.slug == "rate-limited"
    db.run("UPDATE create_events SET created_at = created_at - interval '2 minutes'")
    with pytest.raises(Problem) as refused:
        create_edge.create_verification(db, spaced, KEYRING, request, "k2")
    assert refused.value.status == 422 and refused.value.slug == "destination-suppressed"


def test_silent_answer_creates_and_fails_the_suppressed_delivery_at_once(service_env, db):
    """SUPPRESSED_ANSWER=silent: 201 as for any address; the delivery fails at once with reason
    `suppressed` (never sent), and the site learns it from the read API and delivery.failed."""
    import dataclasses

    from signup_verification.verifications import read

    create(db, "quiet@example.com", key="k1")
    assert bounce(db).suppressed == 1
    silent = dataclasses.replace(
        SETTINGS.create, abuse=dataclasses.replace(SETTINGS.create.abuse, suppressed_answer="silent")
    )
    db.run("SET signup_verification.webhooks = 'on'")
    request = CreateVerificationRequest(account_id="acct-quiet", channel="email", destination="quiet@example.com")
    answer = create_edge.create_verification(db, silent, KEYRING, request, "k2")
    assert answer.status == 201
    import uuid

    view = read.read(db, KEYRING, SETTINGS.create.link_base, uuid.UUID(answer.body["verification_id"]))
    assert view is not None
    [delivery] = view.deliveries
    assert delivery.status == "failed" and delivery.attempts == 0
    assert delivery.reason == {"category": "suppressed", "code": None, "provider": None, "fault": "recipient"}
    [event] = db.run(
        "SELECT payload FROM delivery_intents WHERE verification_id = :v AND event_type = 'delivery.failed'",
        v=uuid.UUID(answer.body["verification_id"]),
    )
    assert event[0]["deliveries"][0]["reason"]["category"] == "suppressed"
    assert db.run("SELECT count(*) FROM eligible_delivery_intents WHERE channel <> 'webhook'")[0][0] == 0  # no send
