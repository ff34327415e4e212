"""The providers' published signature examples pass our verifiers (and tampered ones do not)."""

from __future__ import annotations

import json

import pytest

from signup_verification.api import report_signatures as sig
from signup_verification.platform.errors import ConfigError

# sendgrid-python's test/unit/test_eventwebhook.py (the SDK's own verifier test): key, signature, timestamp, payload.
SG_KEY = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=="
SG_SIGNATURE = "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+luQAbPIqHh89M15TluLtEZtM="
SG_TIMESTAMP = "1600112502"
SG_PAYLOAD = (
    json.dumps(
        [
            {
                "email": "hello@world.com",
                "event": "dropped",
                "reason": "Bounced Address",
                "sg_event_id": "ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA",
                "sg_message_id": "LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC76C-9.0",
                "smtp-id": "<LRzXl_NHStOGhQ4kofSm_A@ismtpd0039p1iad1.sendgrid.net>",
                "timestamp": 1600112492,
            }
        ],
        sort_keys=True,
        separators=(",", ":"),
    )
    + "\r\n"
).encode()
SG_OTHER_KEY = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEqTxd43gyp8IOEto2LdIfjRQrIbsd4SXZkLW6jDutdhXSJCWHw8REntlo7aNDthvj+y7GjUuFDb/R1NGe1OPzpA=="

# twilio-python's tests/unit/test_request_validator.py (Twilio's documented example).
TW_TOKEN = "12345"  # nosec B105: the published example's token
TW_URL = "https://mycompany.com/myapp.php?foo=1&bar=2"
TW_PARAMS = [
    ("CallSid", "CA1234567890ABCDE"),
    ("Digits", "1234"),
    ("From", "+14158675309"),
    ("To", "+18005551212"),
    ("Caller", "+14158675309"),
]


def test_sendgrid_published_example_verifies():
    assert sig.sendgrid_valid(sig.sendgrid_public_key(SG_KEY), SG_SIGNATURE, SG_TIMESTAMP, SG_PAYLOAD)


@pytest.mark.parametrize(
    "key, signature, timestamp, payload",
    [
        (SG_OTHER_KEY, SG_SIGNATURE, SG_TIMESTAMP, SG_PAYLOAD),  # another account's key
        (SG_KEY, SG_SIGNATURE, SG_TIMESTAMP, b"payload"),  # another body
        (SG_KEY, SG_SIGNATURE, SG_TIMESTAMP, SG_PAYLOAD.rstrip()),  # the body re-serialised (no CRLF)
        (SG_KEY, SG_SIGNATURE, "1600112503", SG_PAYLOAD),  # another timestamp
        (
            SG_KEY,
            "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH3j/0=",
            SG_TIMESTAMP,
            SG_PAYLOAD,
        ),  # the SDK's bad signature  # fmt: skip
        (SG_KEY, "not base64!", SG_TIMESTAMP, SG_PAYLOAD),
        (SG_KEY, "", SG_TIMESTAMP, SG_PAYLOAD),
        (SG_KEY, SG_SIGNATURE, "timestampé", SG_PAYLOAD),
    ],
)
def test_sendgrid_tampering_fails(key, signature, timestamp, payload):
    assert not sig.sendgrid_valid(sig.sendgrid_public_key(key), signature, timestamp, payload)


@pytest.mark.parametrize(
    "bad", ["", "not-base64!", "AAAA", "MCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE="]
)
def test_sendgrid_key_must_be_a_p256_key(bad):
    with pytest.raises(ConfigError, match="SENDGRID_WEBHOOK_PUBLIC_KEY"):
        sig.sendgrid_public_key(bad)


def test_sendgrid_timestamp_window():
    assert sig.sendgrid_fresh("1000", 1200, 300) and sig.sendgrid_fresh("1500", 1200, 300)
    assert not sig.sendgrid_fresh("800", 1200, 300) and not sig.sendgrid_fresh("1600", 1200, 300)
    assert not sig.sendgrid_fresh("-5", 0, 300) and not sig.sendgrid_fresh("１２", 12, 300)


def test_twilio_published_example_computes_and_verifies():
    assert sig.twilio_signature(TW_TOKEN, TW_URL, TW_PARAMS) == "RSOYDt4T1cUTdK1PDd93/VVr8B8="
    assert sig.twilio_valid(TW_TOKEN, TW_URL, TW_PARAMS, "RSOYDt4T1cUTdK1PDd93/VVr8B8=")


def test_twilio_published_example_with_repeated_parameters():
    params = [("Sid", "CA123"), ("SidAccount", "AC123"), ("Digits", "5678"), ("Digits", "1234")]
    assert sig.twilio_signature(TW_TOKEN, TW_URL, params) == "IK+Dwps556ElfBT0I3Rgjkr1wJU="


def test_twilio_published_port_variants():
    # Twilio signs with or without the default port: "kvajT1..." is the example URL with :443.
    assert sig.twilio_valid(TW_TOKEN, TW_URL, TW_PARAMS, "kvajT1Ptam85bY51eRf/AJRuM3w=")
    http = TW_URL.replace("https", "http")
    assert sig.twilio_valid(TW_TOKEN, http, TW_PARAMS, "0ZXoZLH/DfblKGATFgpif+LLRf4=")


@pytest.mark.parametrize(
    "token, url, params, signature",
    [
        ("54321", TW_URL, TW_PARAMS, "RSOYDt4T1cUTdK1PDd93/VVr8B8="),
        (TW_TOKEN, "https://attacker.example/myapp.php?foo=1&bar=2", TW_PARAMS, "RSOYDt4T1cUTdK1PDd93/VVr8B8="),
        (TW_TOKEN, TW_URL, TW_PARAMS + [("MessageStatus", "delivered")], "RSOYDt4T1cUTdK1PDd93/VVr8B8="),
        (TW_TOKEN, TW_URL, TW_PARAMS, "RSOYDt4T1cUTdK1PDd93/VVr8B8"),
        (TW_TOKEN, TW_URL, TW_PARAMS, "ünicode"),
    ],
)
def test_twilio_tampering_fails(token, url, params, signature):
    assert not sig.twilio_valid(token, url, params, signature)
