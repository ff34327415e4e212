"""Abuse protection at create: the phone number policy (SMS, WhatsApp, voice), the keys velocity limits count on, and the
exact keys the suppression list is kept under.

SMS pumping (and its calling twin, toll fraud): we send through Twilio's Messages and Calls APIs, so
nothing but this module stops a script from sending codes to premium-rate, shared-cost or satellite
ranges. Every phone channel meets the same policy. Numbers are refused unless their
country is allowed (SMS_ALLOWED_COUNTRIES) and their type is (SMS_ALLOWED_NUMBER_TYPES, default
mobile and fixed-line-or-mobile). The limits themselves run in SQL (create_limit_wait); this
module computes what they count: keyed digests of the canonical destination, the number prefix
and the caller-supplied client network, so the create_events table reveals none of them.

Two forms of an address, for two questions. Counting (the rate limits) folds every spelling that
may reach one inbox together (`canonical_email`), so aliases cannot multiply the allowance; a fold
that merges two real mailboxes only makes them share one allowance, so counting folds generously.
Blame (the suppression list) names one exact mailbox (`exact_email`: only what never merges two
mailboxes, NFC and the domain lower-cased in its IDNA form), so nobody can get `victim@gmail.com`
refused by bouncing `victim+x@gmail.com`.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import math
import unicodedata
from dataclasses import dataclass

from ..platform.channels import LANDLINE_CHANNELS, PHONE_CHANNELS, SMS, VOICE, WHATSAPP
from .config import AbuseConfig, ascii_domain

DOTLESS_DOMAINS = frozenset({"gmail.com"})  # Gmail ignores dots in the local part (only Gmail does)
DOMAIN_ALIASES = {"googlemail.com": "gmail.com"}
# Fastmail's subdomain addressing: `anything@user.fastmail.com` is delivered to `user@fastmail.com`
# (fastmail.help, "Plus addressing and subdomain addressing"). Only on its own domains: elsewhere a
# subdomain is another mail domain (`ada@cs.example.edu` is not `cs@example.edu`).
SUBDOMAIN_ADDRESSING = frozenset({"fastmail.com", "fastmail.fm"})
COARSE_SECONDS = 900
# The `To` numbers Twilio answers with a documented error under test credentials (21211, 21612, 21408,
# 21610, 21614). NANP 500 numbers are personal numbers, refused by type unless the sender is the test one.
TWILIO_TEST_RECIPIENTS = frozenset({"+15005550001", "+15005550002", "+15005550003", "+15005550004", "+15005550009"})


class Refused(Exception):
    """A destination the policy refuses (422); the HTTP layer renders it as problem+json."""

    def __init__(self, slug: str, title: str, detail: str, field_detail: str):
        super().__init__(slug)
        self.slug, self.title, self.detail, self.field_detail = slug, title, detail, field_detail
        self.pointer = "#/destination"  # '#/fallback/destination' for a fallback's


@dataclass(frozen=True)
class LimitKeys:
    destination: bytes  # the alias-folded destination the rate limits count on
    prefix: bytes | None = None
    country: str | None = None
    client: bytes | None = None
    exact: bytes | None = None  # the exact address's key (suppression); None: the same digest as `destination`


# How a refusal names the channel it refused for.
_REACHING = {SMS: "SMS", WHATSAPP: "WhatsApp messages", VOICE: "calls"}


def check_phone_number(config: AbuseConfig, channel: str, e164: str) -> str | None:
    """A phone channel's number: its ISO country, or Refused when its country or type is not allowed
    (None for the email, which has neither). Every phone channel goes to the countries
    SMS_ALLOWED_COUNTRIES names and the types SMS_ALLOWED_NUMBER_TYPES names; a call reaches a
    landline too (`fixed_line`), a text does not. Twilio's magic test numbers pass on test
    credentials: Twilio answers them with their documented errors."""
    if channel not in PHONE_CHANNELS:
        return None
    if config.twilio_test_numbers and e164 in TWILIO_TEST_RECIPIENTS:
        return "US"
    import phonenumbers

    number = phonenumbers.parse(e164, None)
    country = phonenumbers.region_code_for_number(number) or "ZZ"
    if country not in config.sms_allowed_countries:
        raise Refused(
            "sms-country-not-allowed",
            "SMS to this country is not enabled",  # one title per problem type (RFC 9457)
            f"This service does not send {_REACHING[channel]} to numbers of this country.",
            "country not allowed",
        )
    kind = phonenumbers.number_type(number)
    allowed = set(config.sms_allowed_number_types) | ({"fixed_line"} if channel in LANDLINE_CHANNELS else set())
    if not any(getattr(phonenumbers.PhoneNumberType, name.upper()) == kind for name in allowed):
        if kind == phonenumbers.PhoneNumberType.FIXED_LINE:
            raise Refused(
                "sms-number-type-not-allowed",
                "This kind of number cannot receive the code",
                f"This is a landline number: {_REACHING[channel]} cannot reach it. Use a mobile number, "
                "or a voice call (channel `voice`), which reaches a landline.",
                "landline: voice only",
            )
        raise Refused(
            "sms-number-type-not-allowed",
            "This kind of number cannot receive the code",
            "Use a mobile number: premium-rate, shared-cost, satellite, VoIP, pager, personal "
            "and landline numbers are refused.",
            "number type not allowed",
        )
    return country


def canonical_email(address: str, plus_tag_domains: frozenset[str] | None = None) -> str:
    """One counting key per inbox: the local part case-folded (NFKC, as Unicode folds identifiers:
    mail systems match it without case), the domain in its IDNA form without a trailing dot, alias
    domains merged, `+tag` stripped (every domain unless `plus_tag_domains` lists some), Gmail's dots
    dropped on Gmail only, Fastmail's subdomain addresses folded into the plus form first."""
    local, _, domain = unicodedata.normalize("NFC", address).rpartition("@")
    local = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", local).casefold())
    domain = ascii_domain(domain).rstrip(".")
    domain = DOMAIN_ALIASES.get(domain, domain)
    user, _, parent = domain.partition(".")
    if parent in SUBDOMAIN_ADDRESSING and user:
        local, domain = f"{user}+{local}", parent
    if plus_tag_domains is None or domain in plus_tag_domains:
        local = local.split("+", 1)[0] or local
    if domain in DOTLESS_DOMAINS:
        local = local.replace(".", "") or local
    return f"{local}@{domain}"


def exact_email(address: str) -> str:
    """One key per mailbox, merging nothing else: NFC, the domain lower-cased in its IDNA (ASCII)
    form; the local part as given (`+tag`, dots and case kept: they may name another mailbox)."""
    local, _, domain = unicodedata.normalize("NFC", address).rpartition("@")
    return f"{local}@{ascii_domain(domain)}"


def client_network(client_ip: str) -> str:
    """The unit a client_ip limit counts: the address for IPv4, its /64 for IPv6."""
    address = ipaddress.ip_address(client_ip)
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


def _digest(secret: bytes, kind: str, value: str) -> bytes:
    return hmac.new(secret, b"rate-limit\x00" + kind.encode() + b"\x00" + value.encode(), hashlib.sha256).digest()


def limit_keys(
    secret: bytes, config: AbuseConfig, channel: str, destination: str, client_ip: str | None, country: str | None
) -> LimitKeys:
    client = _digest(secret, "client", client_network(client_ip)) if client_ip else None
    if channel == "email":
        alias = _digest(secret, "email", canonical_email(destination, config.plus_tag_domains))
        exact = _digest(secret, "email", exact_email(destination))
        return LimitKeys(alias, client=client, exact=None if exact == alias else exact)
    # RATE_LIMIT_COUNTRY_PER_HOUR 0: no country key, so the create neither reads nor records the country's window
    by_country = country if config.per_country_per_hour else None
    return LimitKeys(
        _digest(secret, "sms", destination), _digest(secret, "prefix", destination[:-4]), by_country, client
    )


@dataclass(frozen=True)
class SuppressionKeys:
    """A destination's suppression-list keys under every key of the token ring: an entry written before
    a key rotation still matches, so rotating TOKEN_KEYS lifts no suppression."""

    exact: list[bytes]
    alias: list[bytes]  # matches only entries from before exact keys (key_kind 'alias')


def destination_keys(secrets: list[bytes], config: AbuseConfig, channel: str, destination: str) -> SuppressionKeys:
    keys = [limit_keys(secret, config, channel, destination, None, None) for secret in secrets]
    return SuppressionKeys([k.exact or k.destination for k in keys], [k.destination for k in keys])


def retry_after(config: AbuseConfig, seconds: int) -> int:
    """Exact by default; coarse mode hides when the destination last asked."""
    if not config.coarse_retry_after:
        return seconds
    return max(1, math.ceil(seconds / COARSE_SECONDS)) * COARSE_SECONDS
