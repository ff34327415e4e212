"""Property tests of the request model at the HTTP edge: whatever arrives, the answer is a model or a
ValidationError (which becomes a 400), never another exception (which would become a 500)."""

from __future__ import annotations

import json

import phonenumbers
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from signup_verification.api.create import fingerprint
from signup_verification.api.models import (
    CreateVerificationRequest,
    field_errors,
    normalise_destination,
    valid_idempotency_key,
)

settings.register_profile("edge", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("edge")

FIELDS = ["account_id", "channel", "destination", "locale", "template"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=40),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=8,
)
field_values = st.one_of(
    json_values,
    st.sampled_from(
        ["email", "sms", "signup", "en", "ja-JP", "+14155550100", "ada@example.com", "", " ", "\x00", "a" * 400]
    ),
)
request_dicts = st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=10), field_values, max_size=7)

# Valid input, built from parts email-validator and libphonenumber agree are valid.
local_parts = st.from_regex(r"[A-Za-z0-9](?:[A-Za-z0-9._+-]{0,20}[A-Za-z0-9])?", fullmatch=True).filter(
    lambda s: ".." not in s
)
domains = st.builds(
    lambda labels, tld: ".".join(labels + [tld]),
    st.lists(
        st.from_regex(r"[a-z0-9](?:[a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True).filter(
            lambda label: label[2:4] != "--"
        ),  # 'xn--'-style labels are Punycode only
        min_size=1,
        max_size=3,
    ),
    st.sampled_from(["com", "org", "net", "io", "de", "jp", "co.uk"]),
)
emails = st.builds(lambda local, domain: f"{local}@{domain}", local_parts, domains)
REGIONS = ["US", "GB", "DE", "FR", "JP", "BR", "IN", "AU", "NG", "SE"]
phones = st.sampled_from(REGIONS).map(
    lambda region: phonenumbers.format_number(
        phonenumbers.example_number_for_type(region, phonenumbers.PhoneNumberType.MOBILE),
        phonenumbers.PhoneNumberFormat.E164,
    )
)
account_ids = st.text(
    st.characters(blacklist_categories=["Cc", "Cf", "Zl", "Zp", "Cs"]), min_size=1, max_size=60
).filter(lambda s: s.strip() == s and s != "")
locales = st.none() | st.sampled_from(["en", "ja", "ja-JP", "pt-BR", "zh-Hant-TW", "EN-us"])
valid_requests = st.one_of(
    st.fixed_dictionaries(
        {"account_id": account_ids, "channel": st.just("email"), "destination": emails},
        optional={"locale": locales, "template": st.just("signup")},
    ),
    st.fixed_dictionaries(
        {"account_id": account_ids, "channel": st.just("sms"), "destination": phones}, optional={"locale": locales}
    ),
)


@given(request_dicts)
@settings(max_examples=200)
def test_any_dict_gives_a_model_or_a_validation_error(data):
    try:
        model = CreateVerificationRequest.model_validate(data)
    except ValidationError as exc:
        errors = field_errors(exc)
        assert errors and all(e["pointer"].startswith("#") and e["detail"] for e in errors)
        json.dumps(errors)  # what the problem+json body will carry
    else:
        assert set(data) <= set(FIELDS) and model.channel in ("email", "sms")


@given(st.one_of(json_values, st.binary().map(lambda b: b.decode("latin-1"))))
def test_any_json_value_gives_a_model_or_a_validation_error(value):
    with pytest.raises(ValidationError):
        CreateVerificationRequest.model_validate(value)


@given(valid_requests)
def test_valid_requests_round_trip(data):
    model = CreateVerificationRequest.model_validate(data)
    again = CreateVerificationRequest.model_validate(model.model_dump())
    assert again == model
    assert CreateVerificationRequest.model_validate_json(model.model_dump_json()) == model
    assert model.account_id == data["account_id"] and model.template == "signup"


@given(
    local_parts, domains, st.sampled_from([str.upper, str.lower, str.title]), st.sampled_from(["", " ", "\t", "\n "])
)
def test_emails_are_normalised_to_one_form(local, domain, case, space):
    typed = f"{space}{local}@{case(domain)}{space}"
    model = CreateVerificationRequest(account_id="a", channel="email", destination=typed)
    assert model.destination == f"{local}@{domain}"  # domain lower-cased, local part kept as typed
    assert normalise_destination("email", model.destination) == model.destination  # idempotent
    plain = CreateVerificationRequest(account_id="a", channel="email", destination=f"{local}@{domain}")
    assert fingerprint(model) == fingerprint(plain)  # one Idempotency-Key, one request


def test_internationalised_email_is_normalised():
    model = CreateVerificationRequest(account_id="a", channel="email", destination="ada@BÜCHER.example.com")
    assert model.destination == "ada@bücher.example.com"


@given(phones, st.sampled_from([phonenumbers.PhoneNumberFormat.INTERNATIONAL, phonenumbers.PhoneNumberFormat.E164]))
def test_phone_numbers_are_normalised_to_e164(e164, style):
    typed = phonenumbers.format_number(phonenumbers.parse(e164), style)
    model = CreateVerificationRequest(account_id="a", channel="sms", destination=typed)
    assert model.destination == e164 and model.destination.startswith("+") and model.destination[1:].isdigit()


ARABIC_INDIC_NUMBER = "+" + "".join(chr(0x0660 + int(d)) for d in "14155550100")


@pytest.mark.parametrize(
    "destination",
    [
        "4155550100",
        "+1555",
        "+10005550100",
        "+44 20",
        "++14155550100",
        "+1 415 555 0100 ext 99",
        "tel:+14155550100",
        "+1-CALL-NOW-0",
        "+" + "1" * 16,
        ARABIC_INDIC_NUMBER,
        "+1 415\n555 0100",
    ],
)
def test_non_e164_phone_numbers_are_refused(destination):
    with pytest.raises(ValidationError) as caught:
        CreateVerificationRequest(account_id="a", channel="sms", destination=destination)
    assert [e["pointer"] for e in field_errors(caught.value)] == ["#/destination"]


@pytest.mark.parametrize(
    "data, pointer",
    [
        ({"account_id": 1}, "#/account_id"),
        ({"channel": b"email"}, "#/channel"),
        ({"locale": 1.0}, "#/locale"),
        ({"destination": 14155550100, "channel": "sms"}, "#/destination"),
        ({"template": ["signup"]}, "#/template"),
    ],
)
def test_strict_types_never_coerce(data, pointer):
    base = {"account_id": "a", "channel": "email", "destination": "a@example.com"}
    with pytest.raises(ValidationError) as caught:
        CreateVerificationRequest.model_validate({**base, **data})
    assert pointer in [e["pointer"] for e in field_errors(caught.value)]


@given(st.text(max_size=300))
def test_idempotency_key_is_1_to_255_printable_ascii(key):
    expected = 1 <= len(key) <= 255 and all(" " <= ch <= "~" for ch in key) and not key.isspace()
    assert valid_idempotency_key(key) is expected


def test_idempotency_key_edges():
    assert valid_idempotency_key("k" * 255) and not valid_idempotency_key("k" * 256)
    assert not valid_idempotency_key(None) and not valid_idempotency_key("") and not valid_idempotency_key("abc\n")


@given(
    st.from_regex(r"[A-Za-z0-9]{4,20}", fullmatch=True),
    st.sampled_from(["email", "sms", "fax"]),
    st.sampled_from(["{}@@example.com", "{}", "{}@{}", "+{}", "{}@example..com", "{} {}@example.com"]),
)
def test_field_errors_never_echo_the_input(sentinel, channel, destination):
    with pytest.raises(ValidationError) as caught:
        CreateVerificationRequest.model_validate(
            {
                "account_id": 7,
                "channel": channel,
                "locale": sentinel + "!",
                "destination": destination.format(sentinel, sentinel),
                "template": sentinel,
            }
        )
    assert sentinel not in json.dumps(field_errors(caught.value))


@given(valid_requests, st.sampled_from([0, 30]))
def test_steps_and_the_fallback_shorthand_are_one_request(data, after):
    """The same steps spelt either way: the same model fields, the same idempotency fingerprint."""
    other = {"channel": "sms", "destination": "+14155550100"} if data["channel"] == "email" else {
        "channel": "email", "destination": "ada@example.com"}  # fmt: skip
    shorthand = {**data, "fallback": {**other, "after_seconds": after}}
    first = {"channel": data["channel"], "destination": data["destination"]}
    rest = {k: v for k, v in data.items() if k not in ("channel", "destination")}
    steps = CreateVerificationRequest.model_validate({**rest, "steps": [first, {**other, "after_seconds": after}]})
    plain = CreateVerificationRequest.model_validate(shorthand)
    assert (steps.channel, steps.destination, steps.fallback) == (plain.channel, plain.destination, plain.fallback)
    assert fingerprint(steps) == fingerprint(plain)
