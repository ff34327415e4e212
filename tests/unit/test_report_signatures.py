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


@pytest.mark.parametrize(
    "params",
    [
        [("Sid", "CA123"), ("SidAccount", "AC123"), ("Digits", "5678"), ("Digits", "1234")],
        # "Ensure duplicates are removed": a value repeated under one name is signed once
        [("Sid", "CA123"), ("SidAccount", "AC123"), ("Digits", "5678"), ("Digits", "1234"), ("Digits", "1234")],
        [("Digits", "1234"), ("Digits", "5678"), ("Digits", "1234"), ("SidAccount", "AC123"), ("Sid", "CA123")],
    ],
)
def test_twilio_published_example_with_repeated_parameters(params):
    assert sig.twilio_signature(TW_TOKEN, TW_URL, params) == "IK+Dwps556ElfBT0I3Rgjkr1wJU="
    assert sig.twilio_valid(TW_TOKEN, TW_URL, params, "IK+Dwps556ElfBT0I3Rgjkr1wJU=")


@pytest.mark.parametrize(
    "url, signature",
    [
        (TW_URL, "kvajT1Ptam85bY51eRf/AJRuM3w="),  # signed with :443 added
        (TW_URL.replace("https", "http"), "0ZXoZLH/DfblKGATFgpif+LLRf4="),  # with :80 added
        (TW_URL.replace(".com", ".com:1234"), "RSOYDt4T1cUTdK1PDd93/VVr8B8="),  # a port removed, any port
        (TW_URL.replace(".com", ".com:1234").replace("https", "http"), "Zmvh+3yNM1Phv2jhDCwEM3q5ebU="),  # kept
    ],
)
def test_twilio_published_port_variants(url, signature):
    """twilio-python's own vectors (test_validation_adds_port_on_*, test_validation_removes_port_on_*)."""
    assert sig.twilio_valid(TW_TOKEN, url, TW_PARAMS, signature)


def documented(token: str, url: str, params: list[tuple[str, str]]) -> str:
    """Twilio's algorithm as twilio.com/docs/usage/security describes it, written out apart from ours:
    the URL, then every POST field's name and value sorted by name, HMAC-SHA1 under the auth token."""
    import base64
    import hashlib
    import hmac

    data = url + "".join(name + value for name, value in sorted(params))
    return base64.b64encode(hmac.new(token.encode(), data.encode(), hashlib.sha1).digest()).decode()


USER_INFO_URL = "https://user:pass@reports.example.com/delivery_reports/twilio"


@pytest.mark.parametrize(
    "signed_url, accepted",
    [
        (USER_INFO_URL, True),  # the StatusCallback as configured, credentials and all
        ("https://user:pass@reports.example.com:443/delivery_reports/twilio", True),  # with the default port
        ("https://reports.example.com/delivery_reports/twilio", False),  # not the URL RequestValidator is given
        ("https://user:pass@reports.example.com:8443/delivery_reports/twilio", False),
    ],
)
def test_twilio_user_info_in_the_url_is_part_of_what_is_signed(signed_url, accepted):
    params = [("MessageSid", "SM1"), ("MessageStatus", "delivered")]
    assert sig.twilio_valid(TW_TOKEN, USER_INFO_URL, params, documented(TW_TOKEN, signed_url, params)) is accepted


def test_twilio_a_port_is_removed_as_requestvalidator_removes_it_even_after_user_info():
    """remove_port keeps what comes before the netloc's first ':' (the user name, with user-info and
    a port): RequestValidator accepts a signature of that URL, and so do we: exactly its answers."""
    url = "https://user:pass@reports.example.com:8443/twilio"
    params = [("MessageSid", "SM1")]
    assert sig.twilio_valid(TW_TOKEN, url, params, documented(TW_TOKEN, url, params))
    assert sig.twilio_valid(TW_TOKEN, url, params, documented(TW_TOKEN, "https://user/twilio", params))
    assert not sig.twilio_valid(
        TW_TOKEN, url, params, documented(TW_TOKEN, "https://reports.example.com/twilio", params)
    )


@pytest.mark.parametrize(
    "body, params",
    [
        (b"MessageSid=SM1&MessageStatus=sent", [("MessageSid", "SM1"), ("MessageStatus", "sent")]),
        (b"A=&B=1", [("A", ""), ("B", "1")]),  # a blank value is signed (name only)
        (b"A&B=1", [("A", ""), ("B", "1")]),  # a name without '=': Flask's form holds it blank
        (b"A=1&&B=2", [("A", "1"), ("B", "2")]),  # an empty field is nothing
        (b"Body=a+b%2Bc", [("Body", "a b+c")]),  # '+' is a space, %2B a plus
        (b"Body=%FF%41", [("Body", "%FFA")]),  # an escape that is no UTF-8 stays as written
        (b"To=%2B14155550123&To=%2B14155550123", [("To", "+14155550123"), ("To", "+14155550123")]),
        ("Body=h\u00e9".encode(), [("Body", "hé")]),  # raw UTF-8 in the body
    ],
)
def test_twilio_forms_are_read_as_flask_hands_them_to_requestvalidator(body, params):
    assert sig.twilio_form(body, "application/x-www-form-urlencoded") == params
    assert sig.twilio_valid(TW_TOKEN, TW_URL, sig.twilio_form(body, "application/x-www-form-urlencoded") or [],
                            documented(TW_TOKEN, TW_URL, sorted(set(params))))  # fmt: skip


def test_twilio_forms_flask_would_not_parse():
    assert sig.twilio_form(b"\xff=1", "application/x-www-form-urlencoded") is None  # not UTF-8: Flask refuses
    assert sig.twilio_form(b"MessageSid=SM1", "application/json") == []  # not a form: request.form is empty
    many = "&".join(f"f{n}=1" for n in range(101)).encode()
    assert sig.twilio_form(many, "application/x-www-form-urlencoded") is None  # our one bound


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
