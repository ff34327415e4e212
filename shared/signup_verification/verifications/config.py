"""Create's, confirm's and the tokens' settings (README "Configuration"; each declared once,
platform/settings.py). The abuse limits' mechanics are abuse.py's; what they are set to is here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..outbox.config import NudgeConfig
from ..platform.config import LOCAL_DIR, Target, production_flag
from ..platform.errors import ConfigError
from ..platform.settings import Env, Setting, part, setting, words

# The targets that derive or check tokens (reconcile and status never do: no key secret to grant them).
TOKEN_TARGETS = frozenset({Target.CREATE, Target.CONFIRM, Target.DISPATCH})
TWILIO_FROM = Setting(
    "TWILIO_FROM",
    None,
    help="required with `SMS_TRANSPORT=twilio`: an E.164 number or a Messaging Service SID (`MG…`)",
)
# Twilio's test credentials send from this number only, and a live account cannot send from it (it
# is no account's number: twilio.com/docs/iam/test-credentials). So TWILIO_FROM set to it is how the
# service knows it runs on test credentials, with no setting of its own that could be left on.
TWILIO_TEST_SENDER = "+15005550006"
# Every `From` number Twilio's test credentials answer (twilio.com/docs/iam/test-credentials): the test
# sender and three that fail on purpose. None is a live account's number: production refuses them all.
TWILIO_MAGIC_SENDERS = frozenset({TWILIO_TEST_SENDER, "+15005550001", "+15005550007", "+15005550008"})
# Read by dispatch (which sends through them) and by create (which offers WhatsApp and calls in
# production only where their transport is set: an upgrade offers no channel its operator has not set up).
WHATSAPP_TRANSPORT = Setting(
    "WHATSAPP_TRANSPORT",
    "console",
    choices=("twilio", "console"),
    help="`twilio` (Twilio's Messages API with `TWILIO_ACCOUNT_SID`, `TWILIO_AUTH_TOKEN`, `TWILIO_WHATSAPP_FROM`, "
    "`TWILIO_WHATSAPP_CONTENT_SIDS`) or `console`; set it on create too: in production create offers `whatsapp` "
    "only with `twilio` (else 422 `channel-not-offered`)",
)
VOICE_TRANSPORT = Setting(
    "VOICE_TRANSPORT",
    "console",
    choices=("twilio", "console"),
    help="`twilio` (Twilio's Calls API with `TWILIO_ACCOUNT_SID`, `TWILIO_AUTH_TOKEN` and a caller ID) or "
    "`console`; set it on create too: in production create offers `voice` only with `twilio` (else 422 "
    "`channel-not-offered`)",
)
VERIFICATION_TTL = Setting(
    "VERIFICATION_TTL_SECONDS",
    600,
    minimum=30,
    help="link/code lifetime (ASVS 5.0 6.5.5: ≤ 10 min for out-of-band codes)",
)
CODE_DIGITS = Setting("SMS_CODE_DIGITS", 6, minimum=6, help="digits of an SMS code")


def _link_base(raw: str, env: Env) -> str:
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.fragment:
        raise ValueError(f"must be an http(s) URL with a host and no fragment, got {raw!r}")
    return raw


VERIFY_LINK_BASE = Setting(
    "VERIFY_LINK_BASE",
    "http://localhost:8082/",
    parse=_link_base,
    help="the `confirm_verification` target's public URL: the email's link is `VERIFY_LINK_BASE?token=…`, the "
    "code-entry page (`code_entry_url`) `VERIFY_LINK_BASE?entry=…`, and every SMS ends with `@<its host> #<code>`",
)
PRODUCT_NAME = Setting(
    "PRODUCT_NAME",
    "Example",
    help="the product named in messages and on the confirmation pages; refused at start-up if it pushes an "
    "SMS template past its segment budget (e.g. a non-GSM `™`)",
)
# Local default (production's create refuses to start without SMS_ALLOWED_COUNTRIES): a short list of
# countries with well-known mobile ranges, enough for development and the tests.
LOCAL_SMS_COUNTRIES = frozenset({"US", "CA", "GB", "DE", "FR", "JP", "AU"})
# phonenumbers.PhoneNumberType's names, lower case; phonenumbers (17 ms) is imported where a number
# is checked, not at every target's start.
NUMBER_TYPES = frozenset(
    t.lower()
    for t in (
        "FIXED_LINE",
        "MOBILE",
        "FIXED_LINE_OR_MOBILE",
        "TOLL_FREE",
        "PREMIUM_RATE",
        "SHARED_COST",
        "VOIP",
        "PERSONAL_NUMBER",
        "PAGER",
        "UAN",
        "VOICEMAIL",
        "UNKNOWN",
    )
)
DEFAULT_NUMBER_TYPES = frozenset({"mobile", "fixed_line_or_mobile"})


def _countries(raw: str, env: Env) -> frozenset[str]:
    codes = words(upper=True)(raw, env)
    if not codes or not all(len(c) == 2 and c.isascii() and c.isalpha() for c in codes):
        raise ValueError("must be ISO 3166 alpha-2 codes separated by commas, e.g. US,CA,GB")
    return codes


def _number_types(raw: str, env: Env) -> frozenset[str]:
    types = words()(raw, env)
    if not types or not types <= NUMBER_TYPES:
        raise ValueError("must name phonenumbers types: " + ", ".join(sorted(NUMBER_TYPES)))
    return types


def ascii_domain(domain: str) -> str:
    """The domain lower-cased in its IDNA (UTS 46) ASCII form: `Bücher.de` and `xn--bcher-kva.de`
    are one domain. PLUS_TAG_DOMAINS is read in this form, and abuse.py's keys are written in it."""
    import idna  # email_validator's own dependency, loaded already where an address was validated

    try:
        domain = idna.encode(domain, uts46=True).decode("ascii")
    except (idna.IDNAError, UnicodeError, ValueError):
        pass
    return domain.lower()


def _plus_tag_domains(raw: str, env: Env) -> frozenset[str] | None:
    """`*`: every domain; else only these (lower case, IDNA form, as the counting key writes them)."""
    if raw.strip() == "*":
        return None
    return frozenset(ascii_domain(domain) for domain in words()(raw, env))


@dataclass(frozen=True)
class AbuseConfig:
    sms_allowed_countries: frozenset[str] = setting(
        "SMS_ALLOWED_COUNTRIES",
        LOCAL_SMS_COUNTRIES,
        parse=_countries,
        required_in_production={Target.CREATE},
        form="ISO 3166 alpha-2 codes, e.g. US,CA,GB",
        help="ISO 3166 alpha-2 codes SMS, WhatsApp messages and calls may go to; others answer 422 "
        "`sms-country-not-allowed`",
    )
    sms_allowed_number_types: frozenset[str] = setting(
        "SMS_ALLOWED_NUMBER_TYPES",
        DEFAULT_NUMBER_TYPES,
        parse=_number_types,
        help="`phonenumbers` types accepted for SMS and WhatsApp (`fixed_line`, `voip`, `toll_free`, `premium_rate`, "
        "`shared_cost`, `personal_number`, `pager`, `uan`, `voicemail`, `unknown`); others answer 422 "
        "`sms-number-type-not-allowed`. A call also reaches `fixed_line` (a landline)",
    )
    per_account_per_hour: int = setting(
        "RATE_LIMIT_ACCOUNT_PER_HOUR",
        10,
        minimum=1,
        help="creates per `account_id`, all channels; a create refused with an answer about another destination "
        "(`422 destination-suppressed`, its `429`) counts too",
    )
    per_prefix_per_hour: int = setting(
        "RATE_LIMIT_PREFIX_PER_HOUR",
        10,
        minimum=1,
        help="SMS per number prefix (the E.164 number without its last 4 digits)",
    )
    per_country_per_hour: int = setting(
        "RATE_LIMIT_COUNTRY_PER_HOUR",
        1000,
        minimum=0,
        help="SMS per destination country; `0`: no per-country limit (the allowed countries, the other limits and "
        "the global `SMS_MAX_PER_HOUR` remain). Each SMS create reads up to this many of the country's creates of "
        'the hour (docs/capacity.md, "SMS budget and senders"): infra sets it per tier',
    )
    per_client_per_hour: int = setting(
        "RATE_LIMIT_CLIENT_PER_HOUR",
        20,
        minimum=1,
        help="creates per caller-supplied `client_ip` (IPv6: per /64), the refusals the account limit counts too",
    )
    plus_tag_domains: frozenset[str] | None = setting(
        "PLUS_TAG_DOMAINS",
        None,
        parse=_plus_tag_domains,
        shown_default="`*` (every domain)",
        help="email domains whose `+tag` the limits fold (`victim+1@…` and `victim+2@…` share `victim@…`'s "
        "allowance; the suppression list keeps the exact address); a list narrows it to those domains",
    )
    coarse_retry_after: bool = setting(
        "RATE_LIMIT_RETRY_AFTER",
        False,
        choices={"exact": False, "coarse": True},
        help="`coarse`: a 429's `Retry-After` is rounded up to 15 minutes (hides when an address last asked)",
    )
    suppressed_answer: str = setting(
        "SUPPRESSED_ANSWER",
        "refuse",
        choices=("refuse", "silent"),
        help="`refuse`: create answers `422 destination-suppressed` (after the caller's own limits); `silent`: "
        "`201`, and the delivery fails at once with reason `suppressed` (the site learns it from the read API "
        "and `delivery.failed`)",
    )
    # Twilio's magic `To` numbers are accepted on its test credentials (TWILIO_FROM = TWILIO_TEST_SENDER)
    twilio_test_numbers: bool = TWILIO_FROM.field(view=lambda sender: sender == TWILIO_TEST_SENDER)


@dataclass(frozen=True)
class CreateConfig:
    code_digits: int = CODE_DIGITS.field()
    ttl_seconds: int = VERIFICATION_TTL.field()
    max_confirm_attempts: int = setting(
        "MAX_CONFIRM_ATTEMPTS", 5, minimum=1, help="wrong SMS codes before the verification locks"
    )
    max_delivery_attempts: int = setting(
        "MAX_DELIVERY_ATTEMPTS", 5, minimum=1, help="per intent, ambiguous attempts included"
    )
    idempotency_ttl_seconds: int = setting(
        "IDEMPOTENCY_TTL_SECONDS", 24 * 3600, minimum=60, help="how long an `Idempotency-Key` is remembered"
    )
    rate_limit_per_hour: int = setting(
        "RATE_LIMIT_PER_HOUR",
        5,
        minimum=1,
        help="creates per canonical destination (`+tag`, Gmail dots and `googlemail.com` folded: `docs/security.md`)",
    )
    rate_limit_spacing_seconds: int = setting(
        "RATE_LIMIT_SPACING_SECONDS", 60, minimum=0, help="the least time between two creates for one destination"
    )
    link_base: str = VERIFY_LINK_BASE.field()  # the confirm target: `code_entry_url` is on it
    whatsapp_transport: str = WHATSAPP_TRANSPORT.field()
    voice_transport: str = VOICE_TRANSPORT.field()
    production: bool = production_flag()
    abuse: AbuseConfig = part(AbuseConfig)
    nudge: NudgeConfig = part(NudgeConfig)  # a created verification starts dispatch (outbox/nudge.py)

    def offers(self, channel: str) -> bool:
        """Whether create takes this channel: WhatsApp and voice in production only once their transport
        is set (their console transport is refused there: every send would fail)."""
        transport = {"whatsapp": self.whatsapp_transport, "voice": self.voice_transport}.get(channel)
        return not (self.production and transport == "console")


@dataclass(frozen=True)
class ConfirmConfig:
    code_digits: int = CODE_DIGITS.field()  # the shape a typed code must have
    product_name: str = PRODUCT_NAME.field()  # shown on the confirmation pages
    destination_failures_per_day: int = setting(
        "CODE_FAILURES_PER_DESTINATION_PER_DAY",
        10,
        minimum=0,
        help="wrong SMS codes per number in 24 h across its verifications; past it every code for the number "
        "answers 410 locked (`0`: off)",
    )


def _token_keys(raw: str, env: Env) -> str:
    """Checked here, so a bad key is reported with the rest; the keyring itself is built by Runtime
    (locally it may first have to generate the development key, a file write)."""
    from .tokens import Keyring  # the keyring's code, light, imported where a key is set

    ring = Keyring.parse(raw)
    if env.production and any(k.is_development for k in ring.keys):
        raise ConfigError("TOKEN_KEYS: refusing to run in production with a development token key")
    return raw


@dataclass(frozen=True)
class TokenConfig:
    keys: str | None = setting(
        "TOKEN_KEYS",
        None,
        parse=_token_keys,
        secret=True,
        required_in_production=TOKEN_TARGETS,
        shown_default="generated once into `.local/dev-token-key` (see `VERIFY_LOCAL_DIR`)",
        help="`key_id:base64url-secret[,…]`, first signs, all verify (`verifyctl new-key`)",
    )
    production: bool = production_flag()  # production refuses a missing TOKEN_KEYS and a development key
    local_dir: Path = LOCAL_DIR.field()  # where a local run keeps its generated development key
