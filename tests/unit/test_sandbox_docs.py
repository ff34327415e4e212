"""docs/integrate.md lists every sandbox destination (local/sandbox.py) and every Twilio magic
number create accepts on test credentials, and the sandbox's tables agree with each other."""

from __future__ import annotations

import pytest

from signup_verification.local import sandbox
from signup_verification.verifications import abuse
from signup_verification.verifications.config import TWILIO_TEST_SENDER, AbuseConfig
from support.markdown import section
from support.paths import ROOT

SANDBOX = section(ROOT / "docs" / "integrate.md", "## 6. Testing against the sandbox")


def test_every_test_destination_is_documented():
    for local_part in sandbox.EMAIL:
        assert f"`{local_part}@…`, `{local_part}+tag@…`" in SANDBOX, local_part
    for number in (*sandbox.SMS, *abuse.TWILIO_TEST_RECIPIENTS):
        assert f"`{number}`" in SANDBOX, number
    for table in (sandbox.SMS, sandbox.WHATSAPP, sandbox.CALLS):
        for number, row in table.items():
            assert f"| `{number}` | {row.channel} |" in SANDBOX, number
    assert f"`TWILIO_FROM={TWILIO_TEST_SENDER}`" in SANDBOX


def test_the_sms_table_is_what_the_emulators_do():
    behaving = set(sandbox.SMS_REPORTS) | set(sandbox.SMS_SERVER_ERRORS) | sandbox.SMS_SLOW
    assert set(sandbox.SMS) == behaving


def test_the_whatsapp_and_call_tables_are_what_the_reporter_does():
    assert set(sandbox.WHATSAPP) == set(sandbox.WHATSAPP_REPORTS)
    assert set(sandbox.CALLS) == {*sandbox.CALL_REPORTS, sandbox.LANDLINE}
    assert sandbox.LANDLINE not in sandbox.CALL_REPORTS  # answered by a person


def test_create_accepts_each_sandbox_number_on_its_channel_and_the_landline_for_calls_only():
    config = AbuseConfig()  # the local defaults `verifyctl dev` runs on
    for table in (sandbox.SMS, sandbox.WHATSAPP, sandbox.CALLS):
        for number, row in table.items():
            assert abuse.check_phone_number(config, row.channel, number), number
    for channel in ("sms", "whatsapp"):
        with pytest.raises(abuse.Refused) as refused:
            abuse.check_phone_number(config, channel, sandbox.LANDLINE)
        assert refused.value.slug == "sms-number-type-not-allowed"


def test_an_address_behaves_by_its_local_part_before_any_tag():
    assert sandbox.email_behaviour("bounce@example.com") == "bounce"
    assert sandbox.email_behaviour("Bounce+signup-7@shop.example") == "bounce"
    assert sandbox.email_behaviour("spam+x@example.org") == "spam"
    assert sandbox.email_behaviour("slow@example.com") == "slow"
    assert sandbox.email_behaviour("bouncer@example.com") is None
    assert sandbox.email_behaviour("ada+bounce@example.com") is None
