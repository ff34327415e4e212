"""The keys the create-time limits count on, and their settings."""

from __future__ import annotations

import pytest

from signup_verification.config import load
from signup_verification.platform.errors import ConfigError
from signup_verification.verifications import abuse
from signup_verification.verifications.config import LOCAL_SMS_COUNTRIES, AbuseConfig


# Spellings that can reach one inbox share one counting key; the exact key merges none of them.
@pytest.mark.parametrize(
    "address, canonical",
    [
        ("Victim@Gmail.com", "victim@gmail.com"),
        ("v.i.c.t.i.m+promo@googlemail.com", "victim@gmail.com"),
        ("victim+1@outlook.com", "victim@outlook.com"),
        ("victim+1@contoso-corp.com", "victim@contoso-corp.com"),  # any domain: +tag folds everywhere
        ("Victim+a+b@Contoso-Corp.COM", "victim@contoso-corp.com"),
        ("first.last@outlook.com", "first.last@outlook.com"),  # only Gmail ignores dots
        ("first.last+x@example.org", "first.last@example.org"),
        ("+only@gmail.com", "+only@gmail.com"),  # never an empty local part
        ("...@gmail.com", "...@gmail.com"),
        ("STRASSE@gmail.com", "strasse@gmail.com"),
        ("straße@example.com", "strasse@example.com"),  # case-folded as Unicode folds it
        ("ＡＤＡ@example.com", "ada@example.com"),  # NFKC: fullwidth letters
        ("José@example.com", "josé@example.com"),
        ("Jose\u0301@example.com", "josé@example.com"),  # decomposed é (NFD) is the same local part
        ("ada+x@Bücher.DE", "ada@xn--bcher-kva.de"),  # IDN domain: its IDNA form
        ("ada+y@xn--bcher-kva.de", "ada@xn--bcher-kva.de"),
        ("用户+tag@例子.广告", "用户@xn--fsqu00a.xn--4rr70v"),
        ("ada@example.com.", "ada@example.com"),  # the root's dot
        ("newsletter@ada.fastmail.com", "ada@fastmail.com"),  # Fastmail's subdomain addressing
        ("ada+newsletter@fastmail.com", "ada@fastmail.com"),
        ("ada@cs.example.edu", "ada@cs.example.edu"),  # elsewhere a subdomain is another mail domain
    ],
)
def test_canonical_email_folds_what_may_reach_one_inbox(address, canonical):
    assert abuse.canonical_email(address) == canonical


@pytest.mark.parametrize(
    "address, exact",
    [
        ("Victim+1@Gmail.com", "Victim+1@gmail.com"),
        ("v.ictim@gmail.com", "v.ictim@gmail.com"),
        ("ada+x@Bücher.DE", "ada+x@xn--bcher-kva.de"),
        ("Jose\u0301@example.com", "José@example.com"),
    ],
)
def test_the_exact_key_keeps_the_local_part_as_given(address, exact):
    assert abuse.exact_email(address) == exact


def test_plus_tag_domains_narrow_the_fold_to_the_listed_domains():
    listed = load({"PLUS_TAG_DOMAINS": "gmail.com, Bücher.de"}).create.abuse.plus_tag_domains
    assert listed == frozenset({"gmail.com", "xn--bcher-kva.de"})
    assert abuse.canonical_email("ada+tag@example.org", listed) == "ada+tag@example.org"
    assert abuse.canonical_email("ada+tag@bücher.de", listed) == "ada@xn--bcher-kva.de"
    assert load({}).create.abuse.plus_tag_domains is None  # the default: every domain
    assert load({"PLUS_TAG_DOMAINS": "*"}).create.abuse.plus_tag_domains is None


@pytest.mark.parametrize(
    "ip, network",
    [
        ("203.0.113.9", "203.0.113.9"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:db8:1:2::ffff", "2001:db8:1:2::/64"),
        ("::ffff:203.0.113.9", "203.0.113.9"),  # an IPv4 client seen through a dual stack
    ],
)
def test_client_networks(ip, network):
    assert abuse.client_network(ip) == network


def test_keys_are_keyed_and_the_prefix_drops_the_last_four_digits():
    config = AbuseConfig()
    one = abuse.limit_keys(b"k" * 32, config, "sms", "+14155550100", None, "US")
    same_prefix = abuse.limit_keys(b"k" * 32, config, "sms", "+14155550199", None, "US")
    other_key = abuse.limit_keys(b"j" * 32, config, "sms", "+14155550100", None, "US")
    assert one.prefix == same_prefix.prefix and one.destination != same_prefix.destination
    assert other_key.destination != one.destination and other_key.prefix != one.prefix
    assert one.client is None and one.country == "US"


def test_production_create_refuses_to_start_without_sms_countries():
    with pytest.raises(ConfigError, match="SMS_ALLOWED_COUNTRIES is required in production"):
        load({"ENVIRONMENT": "production", "FUNCTION_TARGET": "create_verification"})
    load({"ENVIRONMENT": "production", "FUNCTION_TARGET": "reconcile"})  # never creates: needs none
    config = load({"ENVIRONMENT": "production", "FUNCTION_TARGET": "reconcile", "SMS_ALLOWED_COUNTRIES": "us, ca"})
    assert config.create.abuse.sms_allowed_countries == frozenset({"US", "CA"})
    assert load({}).create.abuse.sms_allowed_countries == LOCAL_SMS_COUNTRIES  # the documented local list


@pytest.mark.parametrize(
    "name, value",
    [
        ("SMS_ALLOWED_COUNTRIES", "USA"),
        ("SMS_ALLOWED_NUMBER_TYPES", "mobile,cellular"),
        ("RATE_LIMIT_RETRY_AFTER", "vague"),
        ("RATE_LIMIT_ACCOUNT_PER_HOUR", "0"),
    ],
)
def test_bad_abuse_settings_are_named(name, value):
    with pytest.raises(ConfigError, match=name):
        load({name: value})


def test_coarse_retry_after_rounds_up_to_quarter_hours():
    coarse = AbuseConfig(coarse_retry_after=True)
    assert [abuse.retry_after(coarse, s) for s in (1, 53, 900, 901)] == [900, 900, 900, 1800]
    assert abuse.retry_after(AbuseConfig(), 53) == 53
