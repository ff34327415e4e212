"""Proofs read from a verification row: each step's secret proves its own destination, in the order
the proofs were made, from rows written with three steps and from rows written before them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from signup_verification.verifications.proofs import proofs, proved_at

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
ROW = {
    "channel": "email",
    "destination": "ada@example.com",
    "fallback_channel": "sms",
    "fallback_destination": "+14155550100",
    "step3_channel": "whatsapp",
    "step3_destination": "+14155550199",
    "verified_at": T0,
    "verified_channel": "whatsapp",
    "verified_via": "code",
    "second_proof_at": None,
    "second_proof_channel": None,
    "third_proof_at": None,
}


def _listed(row: dict) -> list[tuple[str, str, str]]:
    return [(p.channel, p.via, p.destination) for p in proofs(row)]


def test_three_proofs_in_the_order_they_were_made():
    row = {
        **ROW,
        "second_proof_at": T0 + timedelta(seconds=5),
        "second_proof_channel": "email",
        "third_proof_at": T0 + timedelta(seconds=9),
    }
    assert _listed(row) == [
        ("whatsapp", "code", "+1******0199"),
        ("email", "link", "a***@example.com"),
        ("sms", "code", "+1******0100"),
    ]
    assert proved_at(row, "sms") == T0 + timedelta(seconds=9)


def test_only_the_steps_that_proved_are_listed():
    assert _listed(ROW) == [("whatsapp", "code", "+1******0199")]
    assert proved_at(ROW, "email") is None and proved_at(ROW, "voice") is None
    second = {**ROW, "second_proof_at": T0 + timedelta(seconds=5), "second_proof_channel": "sms"}
    assert [p[0] for p in _listed(second)] == ["whatsapp", "sms"] and proved_at(second, "email") is None


def test_a_second_proof_written_before_three_steps_is_the_other_of_the_two():
    row = {
        **ROW,
        "step3_channel": None,
        "step3_destination": None,
        "verified_channel": "sms",
        "second_proof_at": T0 + timedelta(seconds=5),
    }
    assert [p[:2] for p in _listed(row)] == [("sms", "code"), ("email", "link")]
