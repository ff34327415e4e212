"""A call's reports as observations (delivery/reports.py call_observation): each CallStatus and each
AnsweredBy mapped by the voice table, one dedup key per call and status, nothing else read."""

from __future__ import annotations

import pytest

from signup_verification.delivery import reports
from support.reports import call_form

SID = "CA" + "ab" * 16


@pytest.mark.parametrize(
    "status, answered_by, event, detail, permanent, category",
    [
        ("completed", None, "delivered", "completed", False, None),
        ("completed", "human", "delivered", "completed human", False, None),
        ("completed", "unknown", "delivered", "completed unknown", False, None),
        ("completed", "machine_end_beep", "completed", "machine_end_beep", True, "unreachable"),
        ("completed", "fax", "completed", "fax", True, "unreachable"),
        ("busy", None, "busy", None, True, "unreachable"),
        ("no-answer", None, "no_answer", None, True, "unreachable"),
        ("failed", None, "failed", None, True, "unknown"),
        ("canceled", None, "canceled", None, True, "unknown"),
        ("queued", None, "queued", None, False, None),
        ("initiated", None, "initiated", None, False, None),
        ("ringing", None, "ringing", None, False, None),
        ("in-progress", None, "in_progress", None, False, None),
    ],
)
def test_each_call_status(status, answered_by, event, detail, permanent, category):
    found = reports.twilio_observation(call_form(SID, status, answered_by))
    assert (found.event, found.detail, found.permanent, found.category) == (event, detail, permanent, category)
    assert (found.dedup_key, found.provider_ref, found.fault in (None, "transient_or_unknown")) == (
        f"{SID}:{status}", SID, True)  # fmt: skip
    assert reports.ends_call(found) is None  # a status callback comes once the call is over: nothing to end


@pytest.mark.parametrize(
    "answered_by, permanent",
    [("human", False), ("unknown", False), ("machine_start", True), ("machine_end_beep", True),
     ("machine_end_silence", True), ("machine_end_other", True), ("fax", True)],
)  # fmt: skip
def test_each_detection_result(answered_by, permanent):
    found = reports.twilio_observation(call_form(SID, answered_by=answered_by))
    assert (found.event, found.detail, found.permanent, found.dedup_key) == (
        "answered", answered_by, permanent, f"{SID}:answered")  # fmt: skip
    assert reports.ends_call(found) == (SID if permanent else None)
    if permanent:
        assert (found.fault, found.scope, found.code) == ("transient_or_unknown", "message", answered_by)


def test_a_failed_call_naming_a_listed_code_takes_its_row():
    found = reports.twilio_observation(call_form(SID, "failed", ErrorCode="21217"))
    assert (found.fault, found.category, found.code, found.error_code) == (
        "recipient", "invalid_destination", "21217", 21217)  # fmt: skip


@pytest.mark.parametrize(
    "form",
    [{"CallSid": "CA1", "CallStatus": "completed"}, {"CallSid": SID, "CallStatus": "answered"},
     {"CallSid": SID, "AnsweredBy": "robot"}, {"CallSid": SID}, {"CallSid": SID + "\x00", "CallStatus": "busy"}],
)  # fmt: skip
def test_malformed(form):
    with pytest.raises(reports.MalformedReport):
        reports.twilio_observation(form)


def test_a_message_sid_makes_it_a_message_report():
    found = reports.twilio_observation({"MessageSid": "SM" + "0" * 32, "MessageStatus": "read", "CallSid": SID})
    assert (found.event, found.provider_ref) == ("read", "SM" + "0" * 32)
