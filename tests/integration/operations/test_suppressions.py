"""`verifyctl suppression list|clear` (issue 13): a hard bounce refuses creates to that inbox until an
operator clears it, by destination, through the same canonical digest create uses."""

from __future__ import annotations

import json

import pytest

from signup_verification import cli
from signup_verification.api import create as create_edge
from signup_verification.api.models import CreateVerificationRequest
from signup_verification.api.problems import Problem
from signup_verification.delivery import reports
from support.factories import KEYRING, SETTINGS, deliver


def verifyctl(service_env, capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def create(db, destination, key):
    request = CreateVerificationRequest(account_id=f"acct-{key}", channel="email", destination=destination)
    return create_edge.create_verification(db, SETTINGS.create, KEYRING, request, key)


def bounce(db, suppress_days=None):
    [intent_id] = deliver(db)
    event = reports.Observation(dedup_key=f"ev-{intent_id}", event="bounce", intent_id=intent_id,
                                attempt_id=f"{intent_id}:1", detail="bounce 5.1.1", permanent=True)  # fmt: skip
    return reports.ingest(db, "sendgrid", [event], suppress_days)


def test_list_then_clear_by_another_spelling_lets_create_through(service_env, db, capsys):
    create(db, "ada.lovelace@gmail.com", "k1")
    assert bounce(db).suppressed == 1
    code, out, _ = verifyctl(service_env, capsys, "suppression", "list", "--json")
    [entry] = json.loads(out.strip().splitlines()[-1])  # (log records may share stdout after other tests)
    assert code == 0 and entry["channel"] == "email" and entry["expires_at"] is None
    assert "ada" not in out and "gmail" not in out  # keys, never destinations
    with pytest.raises(Problem) as refused:
        create(db, "adalovelace+signup@googlemail.com", "k2")
    assert refused.value.status == 422
    code, out, _ = verifyctl(service_env, capsys, "suppression", "clear", "AdaLovelace@gmail.com")
    assert code == 0 and "cleared: the destination" in out
    assert create(db, "ada.lovelace@gmail.com", "k3").status == 201
    code, out, _ = verifyctl(service_env, capsys, "suppression", "clear", "ada.lovelace@gmail.com")
    assert code == 1 and out.strip().splitlines()[-1] == "no such suppression"


def test_a_suppression_period_expires_by_itself(service_env, db, capsys):
    create(db, "grace@example.com", "k1")
    bounce(db, suppress_days=1)
    db.run("UPDATE destination_suppressions SET expires_at = now() - interval '1 second'")
    assert create(db, "grace@example.com", "k2").status == 201
    assert (
        verifyctl(service_env, capsys, "suppression", "list")[1].strip().splitlines()[-1]
        == "no destination is suppressed"
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["suppression", "clear"], "give the destination"),
        (["suppression", "clear", "not-an-address@"], "not a valid email destination"),
        (["suppression", "clear", "--key", "zz", "--channel", "sms"], "--key must be the hex key"),
        (["suppression", "clear", "--key", "00ff"], "--key needs --channel"),
    ],
)
def test_bad_input_is_one_line(service_env, db, capsys, argv, message):
    code, _, err = verifyctl(service_env, capsys, *argv)
    assert code == 1 and err.startswith("verifyctl: ") and message in err and err.count("\n") == 1
