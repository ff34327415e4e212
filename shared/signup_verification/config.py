"""Every setting, read once from the environment into small frozen configs, one per concern.

This is the only module that reads the environment (local/ emulates the platform and may too).
`load()` resolves `sm://` Secret Manager references (platform/secret_manager.py), parses every
variable README.md's "Configuration" tables document, and raises one ConfigError listing each bad
variable with its reason, rather than stopping at the first. Each config type lives beside the
code it configures; this module sits above every layer because it builds all of them.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.utils import parseaddr
from pathlib import Path
from typing import TypeVar

from .api.auth import GUARDED_TARGETS, AuthConfig, SigningKey, parse_signing_keys
from .api.delivery_reports_config import DeliveryReportsConfig
from .api.http import HttpConfig
from .api.return_url import ReturnUrlConfig, parse_allowed_origins
from .delivery.channel_config import ChannelsConfig, SendGridConfig, SmtpConfig, TwilioConfig
from .delivery.config import DispatchConfig
from .delivery.message_config import MessageConfig, check_sms_budget, message_domain
from .delivery.webhook_config import WebhookConfig, check_url, parse_secrets
from .operations.reconciler.config import DAY, ReconcilerConfig, SmsLookupConfig
from .operations.signals_config import SignalsConfig
from .outbox.policy import ChannelPolicy, RetryPolicy
from .platform import secret_manager as secrets
from .platform.database import DatabaseConfig
from .platform.errors import ConfigError
from .platform.logs import LoggingConfig
from .platform.migration_config import MigrationConfig
from .platform.shutdown import ShutdownConfig
from .verifications import abuse
from .verifications.confirm_config import ConfirmConfig
from .verifications.create import CreateConfig
from .verifications.tokens import Keyring, TokenConfig

__all__ = ["Config", "ConfigError", "load", "TOKEN_TARGETS"]

# The targets that derive or check tokens; Cloud Run sets FUNCTION_TARGET for each deployment.
TOKEN_TARGETS = frozenset({"create_verification", "confirm_verification", "dispatch"})
LOG_LEVELS = frozenset({"CRITICAL", "FATAL", "ERROR", "WARN", "WARNING", "INFO", "DEBUG", "NOTSET"})
T = TypeVar("T")

# pydantic scans every installed distribution's entry points for plugins when it builds the first
# model (~6 ms of create's cold start, issue 18); none is installed. PYDANTIC_DISABLE_PLUGINS set
# (even empty) in the environment is left as it is.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


@dataclass(frozen=True)
class Config:
    environment: str = "local"  # local | production
    deployment: str = "local"
    function_target: str | None = None  # FUNCTION_TARGET: which entry point this instance serves
    # VERIFY_LOCAL_DIR: development key, console outbox, embedded database. Default: ./.local in the
    # working directory (dev.py runs from the checkout), never beside an installed package.
    local_dir: Path = field(default_factory=lambda: Path.cwd() / ".local")
    database: DatabaseConfig = field(default_factory=DatabaseConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    shutdown: ShutdownConfig = field(default_factory=ShutdownConfig)
    tokens: TokenConfig = field(default_factory=TokenConfig)
    http: HttpConfig = field(default_factory=HttpConfig)
    create: CreateConfig = field(default_factory=CreateConfig)
    confirm: ConfirmConfig = field(default_factory=ConfirmConfig)
    dispatch: DispatchConfig = field(default_factory=DispatchConfig)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    channels: ChannelsConfig = field(default_factory=ChannelsConfig)
    reconciler: ReconcilerConfig = field(default_factory=ReconcilerConfig)
    signals: SignalsConfig = field(default_factory=SignalsConfig)
    auth: AuthConfig = field(default_factory=lambda: AuthConfig(production=False))
    migrations: MigrationConfig = field(default_factory=MigrationConfig)  # verifyctl migrate, verifyctl dev
    reports: DeliveryReportsConfig = field(default_factory=DeliveryReportsConfig)  # issue 13: delivery_reports
    return_url: ReturnUrlConfig = field(default_factory=ReturnUrlConfig)  # issue 12: create's return_url

    @property
    def is_production(self) -> bool:
        return self.environment == "production"


def load(env: Mapping[str, str] | None = None) -> Config:
    """The whole configuration from `env` (default: the process environment), or one ConfigError
    whose message lists every invalid setting (`.problems`: one entry per setting)."""
    read = _Reader(os.environ if env is None else env)
    environment = read.choice("ENVIRONMENT", "local", {"local", "production"})
    production = environment == "production"
    deployment = read.text("DEPLOYMENT") or "local"
    function_target = read.text("FUNCTION_TARGET")
    local_dir = Path(read.text("VERIFY_LOCAL_DIR") or Path.cwd() / ".local").resolve()
    digits = read.integer("SMS_CODE_DIGITS", 6, 6)
    timeout = read.integer("FUNCTION_TIMEOUT_SECONDS", 60, 5)
    send_timeout = read.positive("SEND_TIMEOUT_SECONDS", 10.0)
    concurrency = read.integer("SEND_CONCURRENCY", 8, 1)
    product = read.text("PRODUCT_NAME") or "Example"
    email_from = read.text("EMAIL_FROM") or "Signup <no-reply@localhost>"
    grace = read.positive("SHUTDOWN_GRACE_SECONDS", 8.0)
    sms_max = read.integer("SMS_MAX_PER_HOUR", 1000, 1)  # the claim caps SMS by it; signals alert on it
    retry = _retry_policy(read)
    reports = _reports(read, production)  # issue 13
    config = Config(
        environment=environment,
        deployment=deployment,
        function_target=function_target,
        local_dir=local_dir,
        database=DatabaseConfig(
            url=read.text("DATABASE_URL"),
            instance_connection_name=read.text("INSTANCE_CONNECTION_NAME"),
            user=read.text("DB_USER"),
            name=read.text("DB_NAME") or "verification",
            statement_timeout_ms=read.integer("DATABASE_STATEMENT_TIMEOUT_MS", 15_000, 100),
            production=production,
            local_dir=local_dir,
        ),
        logging=_logging(read, deployment),
        shutdown=ShutdownConfig(grace_seconds=grace),
        tokens=_tokens(read, production, local_dir, function_target),
        http=HttpConfig(max_body_bytes=read.integer("MAX_BODY_BYTES", 16 * 1024, 256)),
        create=CreateConfig(
            code_digits=digits,
            ttl_seconds=read.integer("VERIFICATION_TTL_SECONDS", 600, 30),
            max_confirm_attempts=read.integer("MAX_CONFIRM_ATTEMPTS", 5, 1),
            max_delivery_attempts=read.integer("MAX_DELIVERY_ATTEMPTS", 5, 1),
            idempotency_ttl_seconds=read.integer("IDEMPOTENCY_TTL_SECONDS", 24 * 3600, 60),
            rate_limit_per_hour=read.integer("RATE_LIMIT_PER_HOUR", 5, 1),
            rate_limit_spacing_seconds=read.integer("RATE_LIMIT_SPACING_SECONDS", 60, 0),
            abuse=_abuse(read, production, function_target),
        ),
        confirm=ConfirmConfig(
            code_digits=digits,
            product_name=product,
            destination_failures_per_day=read.integer("CODE_FAILURES_PER_DESTINATION_PER_DAY", 10, 0),
        ),
        dispatch=DispatchConfig(
            deployment=deployment,
            production=production,
            function_timeout_seconds=timeout,
            send_concurrency=concurrency,
            send_timeout_seconds=send_timeout,
            max_batch=read.integer("DISPATCH_MAX_BATCH", 500, 1),
            batch_seconds=read.positive("DISPATCH_BATCH_SECONDS", 2.0),
            safety_margin_seconds=read.positive("DISPATCH_SAFETY_MARGIN_SECONDS", 5.0),
            shutdown_grace_seconds=grace,
            idle_wait=read.flag("DISPATCH_IDLE_WAIT", production),
            idle_poll_seconds=read.positive("DISPATCH_IDLE_POLL_SECONDS", 0.25),
            settle_connection=read.flag("DISPATCH_SETTLE_CONNECTION", False),
            sms_max_per_hour=sms_max,
            messages=MessageConfig(
                product_name=product,
                email_from=email_from,
                code_digits=digits,
                link_base=read.text("VERIFY_LINK_BASE") or "http://localhost:8082/",
            ),
        ),
        retry=retry,
        channels=_channels(read, production, local_dir, email_from, send_timeout, concurrency, reports),
        reconciler=_reconciler(read, retry, deployment, timeout),
        signals=SignalsConfig(
            window_seconds=read.positive("SIGNALS_WINDOW_SECONDS", 300.0),
            ready_age_alert_seconds=read.positive("READY_AGE_ALERT_SECONDS", 120.0),
            watermark_stale_seconds=read.positive("RECONCILE_STALE_SECONDS", 300.0),
            sms_max_per_hour=sms_max,
            awaiting_report_alert_seconds=(  # issue 13: only where provider reports are expected
                read.positive("ACCEPTED_UNDELIVERED_AGE_ALERT_SECONDS", 900.0) if reports.public_url else None
            ),
        ),
        auth=_auth(read, production),
        migrations=_migrations(read),
        reports=reports,
        return_url=_return_url(read, production),
    )
    _check_across(read, config)
    if len(read.errors) == 1:
        raise ConfigError(read.errors[0])
    if read.errors:
        raise ConfigError(f"{len(read.errors)} invalid settings: " + "; ".join(read.errors), tuple(read.errors))
    return config


class _Reader:
    """The environment with `sm://` references resolved, and the errors found so far."""

    def __init__(self, env: Mapping[str, str]):
        self.errors: list[str] = []
        self.env: dict[str, str] = {}
        for name, value in env.items():  # an unreadable reference counts as unset: one error, not two
            self.env[name] = self.attempt(functools.partial(secrets.resolve, name, value), "")

    def attempt(self, build: Callable[[], T], fallback: T) -> T:
        """build(), or `fallback` with its ConfigError recorded (so the others are still checked)."""
        try:
            return build()
        except ConfigError as exc:
            self.errors.extend(exc.problems)
            return fallback

    def fail(self, message: str) -> None:
        self.errors.append(message)

    def text(self, name: str) -> str | None:
        return self.env.get(name) or None

    def integer(self, name: str, default: int, minimum: int = 0) -> int:
        raw = self.env.get(name)
        if raw is None or raw == "":
            return default
        try:
            value = int(raw)
        except ValueError:
            self.fail(f"{name} must be an integer, got {raw!r}")
            return default
        if value < minimum:
            self.fail(f"{name} must be >= {minimum}, got {value}")
            return default
        return value

    def number(self, name: str, default: float, minimum: float = float("-inf")) -> float:
        raw = self.env.get(name)
        if raw is None or raw == "":
            return default
        try:
            value = float(raw)
        except ValueError:
            self.fail(f"{name} must be a number, got {raw!r}")
            return default
        if value < minimum:
            self.fail(f"{name} must be >= {minimum:g}, got {raw}")
            return default
        return value

    def positive(self, name: str, default: float) -> float:
        value = self.number(name, default)
        if value <= 0:
            self.fail(f"{name} must be > 0, got {value:g}")
            return default
        return value

    def flag(self, name: str, default: bool) -> bool:
        raw = (self.env.get(name) or "").strip().lower()
        if not raw:
            return default
        if raw in {"1", "true", "yes", "on"}:
            return True
        if raw in {"0", "false", "no", "off"}:
            return False
        self.fail(f"{name} must be true or false, got {raw!r}")
        return default

    def file(self, name: str) -> str | None:
        path = self.text(name)
        if path is not None and not Path(path).is_file():
            self.fail(f"{name} must name a readable file, got {path!r}")
            return None
        return path

    def choice(self, name: str, default: str, choices: set[str]) -> str:
        value = self.env.get(name) or default
        if value not in choices:
            self.fail(f"{name} must be one of {sorted(choices)}, got {value!r}")
            return default
        return value


def _check_across(read: _Reader, config: Config) -> None:
    """Checks across settings: a bad combination refuses to start, never fails sends."""
    # Only where email is really sent (a production console transport is refused anyway, and
    # deploy-time commands such as `verifyctl migrate` carry no sender).
    email_from = config.dispatch.messages.email_from
    if (
        config.is_production
        and config.channels.email_transport != "console"
        and _sender_domain(email_from) in ("localhost", "")
    ):
        read.fail(f"EMAIL_FROM must be a real sender address in production, not {email_from!r}")
    # PRODUCT_NAME in every SMS template, with the longest code and the most minutes a message states.
    read.attempt(lambda: check_sms_budget(config.dispatch.messages, config.create.ttl_seconds), None)


def _sender_domain(mailbox: str) -> str:
    return parseaddr(mailbox)[1].rpartition("@")[2].lower().rstrip(".")


def _return_url(read: _Reader, production: bool) -> ReturnUrlConfig:
    """RETURN_URL_ALLOWED_ORIGINS (issue 12): the origins create's return_url may point at."""
    origins = read.attempt(lambda: parse_allowed_origins(read.text("RETURN_URL_ALLOWED_ORIGINS"), production), None)
    return ReturnUrlConfig(production=production, allowed_origins=origins or frozenset())


def _migrations(read: _Reader) -> MigrationConfig:
    try:
        return MigrationConfig.from_env(read.env)
    except ValueError as exc:  # its own parser names the variable
        read.fail(str(exc))
        return MigrationConfig()


def _logging(read: _Reader, deployment: str) -> LoggingConfig:
    chosen = (read.text("LOG_FORMAT") or "").lower()
    if chosen and chosen not in ("json", "text"):
        read.fail(f"LOG_FORMAT must be json or text, got {chosen!r}")
        chosen = ""
    fmt = chosen or ("json" if read.text("K_SERVICE") else "text")  # K_SERVICE: set on Cloud Run
    level = (read.text("LOG_LEVEL") or "INFO").upper()
    if level not in LOG_LEVELS:
        read.fail(f"LOG_LEVEL must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL, got {level!r}")
        level = "INFO"
    return LoggingConfig(
        format=fmt,
        level=level,
        deployment=deployment,
        project_id=read.text("GOOGLE_CLOUD_PROJECT") or read.text("GCP_PROJECT"),
    )


def _tokens(read: _Reader, production: bool, local_dir: Path, target: str | None) -> TokenConfig:
    """Checked here so a bad key is reported with the rest; the keyring itself is built by Runtime
    (locally it may have to generate the development key, a file write)."""
    config = TokenConfig(keys=read.text("TOKEN_KEYS"), production=production, local_dir=local_dir)
    if config.keys:
        ring = read.attempt(lambda: Keyring.parse(config.keys or ""), None)
        if ring is not None and production and any(k.is_development for k in ring.keys):
            read.fail("refusing to run in production with a development token key")
    elif production and target in TOKEN_TARGETS:  # reconcile and status never touch tokens
        read.fail("TOKEN_KEYS is required in production")
    return config


def _abuse(read: _Reader, production: bool, target: str | None) -> abuse.AbuseConfig:
    """Issue 15's create-time limits. Production's create target refuses to start without an
    explicit SMS country list: the local default is for development, not a policy."""
    d = abuse.AbuseConfig()
    countries = _word_set(read.text("SMS_ALLOWED_COUNTRIES"), upper=True)
    if countries is None and production and target == "create_verification":
        read.fail("SMS_ALLOWED_COUNTRIES is required in production (ISO 3166 alpha-2 codes, e.g. US,CA,GB)")
    if countries is not None and not all(len(c) == 2 and c.isascii() and c.isalpha() for c in countries):
        read.fail("SMS_ALLOWED_COUNTRIES must be ISO 3166 alpha-2 codes separated by commas, e.g. US,CA,GB")
        countries = None
    types = _word_set(read.text("SMS_ALLOWED_NUMBER_TYPES"), upper=False)
    if types is not None and not types <= abuse.NUMBER_TYPES:
        read.fail("SMS_ALLOWED_NUMBER_TYPES must name phonenumbers types: " + ", ".join(sorted(abuse.NUMBER_TYPES)))
        types = None
    domains = read.text("PLUS_TAG_DOMAINS")
    plus: frozenset[str] | None = d.plus_tag_domains
    if domains is not None:
        plus = None if domains.strip() == "*" else _word_set(domains, upper=False) or frozenset()
    coarse = read.choice("RATE_LIMIT_RETRY_AFTER", "exact", {"exact", "coarse"}) == "coarse"
    return abuse.AbuseConfig(
        sms_allowed_countries=countries or d.sms_allowed_countries,
        sms_allowed_number_types=types or d.sms_allowed_number_types,
        per_account_per_hour=read.integer("RATE_LIMIT_ACCOUNT_PER_HOUR", d.per_account_per_hour, 1),
        per_prefix_per_hour=read.integer("RATE_LIMIT_PREFIX_PER_HOUR", d.per_prefix_per_hour, 1),
        per_country_per_hour=read.integer("RATE_LIMIT_COUNTRY_PER_HOUR", d.per_country_per_hour, 1),
        per_client_per_hour=read.integer("RATE_LIMIT_CLIENT_PER_HOUR", d.per_client_per_hour, 1),
        plus_tag_domains=plus,
        coarse_retry_after=coarse,
    )


def _word_set(raw: str | None, upper: bool) -> frozenset[str] | None:
    """'a, b' -> {'a', 'b'} (case-normalised); unset or blank -> None."""
    words = frozenset((w.strip().upper() if upper else w.strip().lower()) for w in (raw or "").split(",") if w.strip())
    return words or None


def _retry_policy(read: _Reader) -> RetryPolicy:
    """AMBIGUOUS_POLICY_EMAIL / _SMS = retry|hold|fail, AMBIGUOUS_HOLD_SECONDS_EMAIL / _SMS,
    RETRY_BACKOFF_SECONDS = '60,300,900'."""
    default = RetryPolicy()
    channels = {}
    for name, current in default.channels.items():
        upper = name.upper()
        policy = read.text(f"AMBIGUOUS_POLICY_{upper}") or current.ambiguity
        if policy not in ("retry", "hold", "fail"):
            read.fail(f"AMBIGUOUS_POLICY_{upper} must be retry, hold or fail")
            policy = current.ambiguity
        hold = read.number(f"AMBIGUOUS_HOLD_SECONDS_{upper}", current.hold_seconds)
        channels[name] = ChannelPolicy(policy, hold)  # type: ignore[arg-type]
    raw = read.text("RETRY_BACKOFF_SECONDS")
    backoff = default.backoff
    if raw:
        try:
            backoff = tuple(float(x) for x in raw.split(","))
        except ValueError:
            backoff = ()
        if not backoff or any(b <= 0 for b in backoff):
            read.fail("RETRY_BACKOFF_SECONDS must be positive numbers, e.g. 60,300,900")
            backoff = default.backoff
    return RetryPolicy(backoff=backoff, channels=channels)


def _channels(
    read: _Reader,
    production: bool,
    local_dir: Path,
    email_from: str,
    send_timeout: float,
    concurrency: int,
    reports: DeliveryReportsConfig,
) -> ChannelsConfig:
    """Missing provider credentials are reported by build_channels when dispatch starts (only the
    dispatch target sends)."""
    return ChannelsConfig(
        email_transport=read.choice("EMAIL_TRANSPORT", "console", {"smtp", "sendgrid", "console"}),
        sms_transport=read.choice("SMS_TRANSPORT", "console", {"twilio", "console"}),
        smtp_ca_file=read.file("SMTP_CA_FILE"),
        smtp=SmtpConfig(
            host=read.text("SMTP_HOST") or "localhost",
            port=read.integer("SMTP_PORT", 8025, 1),
            security=read.choice("SMTP_SECURITY", "none", {"none", "starttls", "tls"}),
            username=read.text("SMTP_USERNAME"),
            password=read.text("SMTP_PASSWORD"),
            timeout=send_timeout,
            helo_name=message_domain(email_from),
        ),
        sendgrid=SendGridConfig(
            api_key=read.text("SENDGRID_API_KEY"),
            url=read.text("SENDGRID_API_URL") or "https://api.sendgrid.com/v3/mail/send",
        ),
        twilio=TwilioConfig(
            account_sid=read.text("TWILIO_ACCOUNT_SID"),
            auth_token=read.text("TWILIO_AUTH_TOKEN"),
            sender=read.text("TWILIO_FROM"),
            api_url=read.text("TWILIO_API_URL") or "https://api.twilio.com",
            status_callback=reports.status_callback,
        ),
        send_timeout_seconds=send_timeout,
        send_concurrency=concurrency,
        production=production,
        local_dir=local_dir,
        webhook=_webhook(read, production),
    )


def _webhook(read: _Reader, production: bool) -> WebhookConfig:
    """Issue 12: WEBHOOK_URL turns events on (every target that changes a verification writes them);
    WEBHOOK_SECRET is needed where they are sent (dispatch: build_channels says so)."""
    url = read.text("WEBHOOK_URL")
    raw_secret = read.text("WEBHOOK_SECRET")
    no_secrets: tuple[bytes, ...] = ()
    return WebhookConfig(
        url=read.attempt(lambda: check_url(url, production), None) if url else None,
        secrets=read.attempt(lambda: parse_secrets(raw_secret), no_secrets) if raw_secret else no_secrets,
        max_attempts=read.integer("WEBHOOK_MAX_ATTEMPTS", WebhookConfig.max_attempts, 1),
    )


def _reconciler(read: _Reader, retry: RetryPolicy, deployment: str, timeout: float) -> ReconcilerConfig:
    d = ReconcilerConfig()
    values = dict(
        batch_size=int(read.number("RECONCILE_BATCH_SIZE", d.batch_size, 1)),
        max_batches=int(read.number("RECONCILE_MAX_BATCHES", d.max_batches, 1)),
        polling_horizon_seconds=read.number("POLLING_HORIZON_SECONDS", d.polling_horizon_seconds, 1),
        redact_after_seconds=read.number("RETENTION_REDACT_AFTER_DAYS", d.redact_after_seconds / DAY, 0) * DAY,
        purge_after_seconds=read.number("RETENTION_PURGE_AFTER_DAYS", d.purge_after_seconds / DAY, 0) * DAY,
        safety_margin_seconds=read.number("RECONCILE_SAFETY_MARGIN_SECONDS", d.safety_margin_seconds, 0),
        policy=retry,
        deployment=deployment,
        function_timeout_seconds=timeout,
        sms_lookup=_sms_lookup(read),
    )
    return read.attempt(lambda: ReconcilerConfig(**values), d)  # type: ignore[arg-type]


def _sms_lookup(read: _Reader) -> SmsLookupConfig | None:
    """Issue 13: the reconciler asks Twilio about ambiguous SMS when it can (Twilio credentials)."""
    sid, token = read.text("TWILIO_ACCOUNT_SID"), read.text("TWILIO_AUTH_TOKEN")
    if read.text("SMS_TRANSPORT") != "twilio" or not (sid and token) or not read.flag("SMS_LOOKUP", True):
        return None
    d = SmsLookupConfig(sid, token)
    return SmsLookupConfig(
        account_sid=sid,
        auth_token=token,
        sender=read.text("TWILIO_FROM") or "",
        api_url=read.text("TWILIO_API_URL") or d.api_url,
        max_calls=read.integer("SMS_LOOKUP_MAX_CALLS", d.max_calls, 0),
        timeout_seconds=read.positive("SMS_LOOKUP_TIMEOUT_SECONDS", d.timeout_seconds),
        min_interval_seconds=read.number("SMS_LOOKUP_INTERVAL_SECONDS", d.min_interval_seconds, 0.0),
        settle_seconds=read.positive("SMS_LOOKUP_SETTLE_SECONDS", d.settle_seconds),
    )


def _reports(read: _Reader, production: bool) -> DeliveryReportsConfig:
    """Issue 13's delivery_reports target: the providers' verification material and its limits."""
    url = read.text("DELIVERY_REPORTS_URL")
    if url and not url.startswith(("https://", "http://")):
        read.fail(f"DELIVERY_REPORTS_URL must be an http(s) URL, got {url!r}")
        url = None
    elif url and production and not url.startswith("https://"):
        # the providers post (and Twilio signs) to this URL: plain http would expose reports in transit
        read.fail(f"DELIVERY_REPORTS_URL must be https in production, got {url!r}")
        url = None
    raw_key = read.text("SENDGRID_WEBHOOK_PUBLIC_KEY")
    key = None
    if raw_key:  # its parser only where the key is set (issue 18: not on every target's start)
        from .api import report_signatures

        key = read.attempt(lambda: report_signatures.sendgrid_public_key(raw_key), None)
    days = read.number("SUPPRESSION_DAYS", 0.0, 0.0)
    return DeliveryReportsConfig(
        public_url=url,
        sendgrid_key=key,
        twilio_auth_token=read.text("TWILIO_AUTH_TOKEN"),
        tolerance_seconds=read.integer("DELIVERY_REPORTS_TOLERANCE_SECONDS", 300, 30),
        max_body_bytes=read.integer("DELIVERY_REPORTS_MAX_BODY_BYTES", 1024 * 1024, 1024),
        suppress_days=days or None,
    )


def _auth(read: _Reader, production: bool) -> AuthConfig:
    no_keys: tuple[SigningKey, ...] = ()
    keys = read.attempt(lambda: parse_signing_keys(read.text("REQUEST_SIGNING_KEYS") or ""), no_keys)
    if read.text("SIGNED_TARGETS") and not keys:
        read.fail("SIGNED_TARGETS is set but REQUEST_SIGNING_KEYS holds no key")
    targets = frozenset(
        t.strip() for t in (read.text("SIGNED_TARGETS") or "create_verification").split(",") if t.strip()
    )
    unknown = targets - GUARDED_TARGETS
    if unknown:
        read.fail(f"SIGNED_TARGETS names unknown or public targets: {', '.join(sorted(unknown))}")
    invokers = frozenset(e.strip().lower() for e in (read.text("ALLOWED_INVOKERS") or "").split(",") if e.strip())
    raw_tolerance = read.text("SIGNATURE_TOLERANCE_SECONDS") or "300"
    tolerance = 300
    if not raw_tolerance.isdigit() or not 30 <= int(raw_tolerance) <= 3600:
        read.fail("SIGNATURE_TOLERANCE_SECONDS must be an integer between 30 and 3600")
    else:
        tolerance = int(raw_tolerance)
    return AuthConfig(
        production=production,
        signing_keys=keys,
        signed_targets=targets if keys else frozenset(),
        allowed_invokers=invokers,
        tolerance_seconds=tolerance,
    )
