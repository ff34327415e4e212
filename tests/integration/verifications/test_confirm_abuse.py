"""Confirmation abuse: a wrong code after confirmation, full-width digits, per-destination budgets."""

from __future__ import annotations

import base64
import json

import pytest

from signup_verification.config import load
from signup_verification.verifications import confirm as confirmations
from support.factories import created
from support.policy import sent
from support.webhooks import events, sms_code


def _create_sms(db, destination: str = "+14155550100", **options) -> tuple[dict, str]:
    """An SMS verification under the configured limits, its SMS sent: its row and its code."""
    vid = created(db, destination, **{"config": load().create, **options})
    sent(db, vid, "sms")
    return db.one("SELECT * FROM verifications WHERE id = :id", id=vid), sms_code(db, vid)


@pytest.fixture
def client(app_client):
    return app_client("confirm_verification")


def _post(client, body):
    return client.post("/", data=json.dumps(body), content_type="application/json")


def test_a_wrong_code_for_a_confirmed_verification_is_finished_counted_and_names_no_account(client, db, service_env):
    row, code = _create_sms(db)
    assert _post(client, {"verification_id": str(row["id"]), "code": code}).status_code == 200
    wrong = str((int(code) + 1) % 10**6).zfill(6)
    response = _post(client, {"verification_id": str(row["id"]), "code": wrong})
    assert response.status_code == 410 and response.get_json()["type"].endswith("/verification-finished")
    assert row["account_id"] not in response.get_data(as_text=True)
    state = db.one("SELECT confirm_failures FROM verifications WHERE id = :id", id=row["id"])
    assert state["confirm_failures"] == 1
    again = _post(client, {"verification_id": str(row["id"]), "code": code})  # the right code still hears it
    assert again.status_code == 200 and again.get_json()["already_verified"] is True


def test_full_width_digits_and_ideographic_spaces_confirm(client, db, service_env):
    row, code = _create_sms(db)
    full_width = "".join(chr(ord(d) - ord("0") + 0xFF10) for d in code)
    typed = full_width[:3] + "\u3000" + full_width[3:]
    response = _post(client, {"verification_id": str(row["id"]), "code": typed})
    assert response.status_code == 200, response.get_json()


@pytest.mark.parametrize("code", ["١٢٣٤٥٦", "12345６7", "123456" + " " * 60 + "7"])
def test_other_digit_scripts_and_too_long_codes_stay_malformed(code):
    with pytest.raises(confirmations.MalformedCode):
        confirmations.normalise_code(code, 6)


def test_wrong_codes_are_budgeted_per_destination_across_verifications(app_client, db, service_env, monkeypatch):
    """The 5 tries per verification reset with every new verification (600 guesses a day per
    number), so the destination has a daily budget too: past it every code is refused, the right one
    too, and nothing is consumed."""
    from signup_verification import runtime

    monkeypatch.setenv("CODE_FAILURES_PER_DESTINATION_PER_DAY", "3")
    monkeypatch.setenv("WEBHOOK_URL", "http://127.0.0.1:9/webhooks")  # events on: the lock is announced
    monkeypatch.setenv("WEBHOOK_SECRET", "whsec_" + base64.b64encode(b"k" * 32).decode())
    monkeypatch.setenv("RATE_LIMIT_SPACING_SECONDS", "0")
    runtime.reset()
    client = app_client("confirm_verification")
    settings = load({"RATE_LIMIT_SPACING_SECONDS": "0"})

    def create() -> tuple[dict, str]:
        return _create_sms(db, "+14155550123", account="acct_budget", config=settings.create)

    first, code = create()
    wrong = "000000" if code != "000000" else "111111"
    for _ in range(2):
        assert _post(client, {"verification_id": str(first["id"]), "code": wrong}).status_code == 422
    second, code = create()  # a fresh verification: a fresh per-verification allowance
    wrong = "000000" if code != "000000" else "111111"
    assert _post(client, {"verification_id": str(second["id"]), "code": wrong}).status_code == 422
    refused = _post(client, {"verification_id": str(second["id"]), "code": code})
    assert refused.status_code == 410 and refused.json["type"].endswith("/verification-locked")
    assert "account_id" not in refused.json
    # The answer is `locked`, so the verification is locked for real: the read API says so, what it had
    # left to send is suppressed and the site hears verification.locked (nothing was consumed).
    assert db.one("SELECT status, verified_at FROM verifications WHERE id = :id", id=second["id"]) == {
        "status": "locked",
        "verified_at": None,
    }
    assert {
        r["status"]
        for r in db.rows(
            "SELECT status FROM delivery_intents WHERE verification_id = :v AND role <> 'event'", v=second["id"]
        )
    } <= {"suppressed", "accepted", "failed"}
    assert [e["event_type"] for e in events(db, second["id"])] == ["verification.locked"]
    from signup_verification.operations import signals

    assert signals.compute(db, "test").as_json()["wrong_codes_last_day"] == 3  # counted in the signals
    # Another number is unaffected.
    other, other_code = _create_sms(db, "+14155550177")
    assert _post(client, {"verification_id": str(other["id"]), "code": other_code}).status_code == 200
