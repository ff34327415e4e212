"""Every setting, read once from the environment into small frozen configs, one per concern.

This is the only module that reads the environment (local/ emulates the platform and may too).
`load()` resolves `sm://` Secret Manager references (platform/secret_manager.py), parses every
variable README.md's "Configuration" tables document, and raises one ConfigError listing each bad
variable with its reason, rather than stopping at the first. Each config type lives beside the
code it configures; this module sits above every layer because it builds all of them. The reading
itself is reader.py's Reader; the delivery, operations and caller-check concerns are read by
sections.py (one function each), the rest here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.utils import parseaddr
from pathlib import Path

from ..api.auth import AuthConfig
from ..api.delivery_reports_config import DeliveryReportsConfig
from ..api.http import HttpConfig
from ..api.return_url import ReturnUrlConfig, parse_allowed_origins
from ..delivery.channel_config import ChannelsConfig
from ..delivery.config import DispatchConfig
from ..delivery.message_config import MessageConfig, check_sms_budget
from ..operations.reconciler.config import ReconcilerConfig
from ..operations.signals_config import SignalsConfig
from ..outbox.policy import RetryPolicy
from ..platform.database import DatabaseConfig
from ..platform.errors import ConfigError
from ..platform.logs import LoggingConfig
from ..platform.migration_config import MigrationConfig
from ..platform.shutdown import ShutdownConfig
from ..verifications import abuse
from ..verifications.confirm_config import ConfirmConfig
from ..verifications.create import CreateConfig
from ..verifications.tokens import Keyring, TokenConfig
from . import sections
from .reader import Reader

__all__ = ["Config", "ConfigError", "load", "TOKEN_TARGETS"]

# The targets that derive or check tokens; Cloud Run sets FUNCTION_TARGET for each deployment.
TOKEN_TARGETS = frozenset({"create_verification", "confirm_verification", "dispatch"})
READY_AGE_TTL_FRACTION = 0.2  # READY_AGE_ALERT_SECONDS defaults to this share of VERIFICATION_TTL_SECONDS
LOG_LEVELS = frozenset({"CRITICAL", "FATAL", "ERROR", "WARN", "WARNING", "INFO", "DEBUG", "NOTSET"})

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
    read = Reader(os.environ if env is None else env)
    environment = read.choice("ENVIRONMENT", "local", {"local", "production"})
    production = environment == "production"
    deployment = read.text("DEPLOYMENT") or "local"
    function_target = read.text("FUNCTION_TARGET")
    local_dir = Path(read.text("VERIFY_LOCAL_DIR") or Path.cwd() / ".local").resolve()
    digits = read.integer("SMS_CODE_DIGITS", 6, 6)
    timeout = read.integer("FUNCTION_TIMEOUT_SECONDS", 60, 5)
    send_timeout = read.positive("SEND_TIMEOUT_SECONDS", 10.0)
    concurrency = sections.send_concurrency(read)  # per channel
    ttl = read.integer("VERIFICATION_TTL_SECONDS", 600, 30)
    product = read.text("PRODUCT_NAME") or "Example"
    email_from = read.text("EMAIL_FROM") or "Signup <no-reply@localhost>"
    grace = read.positive("SHUTDOWN_GRACE_SECONDS", 8.0)
    sms_max = read.integer("SMS_MAX_PER_HOUR", 1000, 1)  # the claim caps SMS by it; signals alert on it
    retry = sections.retry_policy(read)
    reports = sections.reports(read, production)  # issue 13
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
            ttl_seconds=ttl,
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
            send_concurrency_max=concurrency,
            send_timeout_seconds=send_timeout,
            max_batch=read.integer("DISPATCH_MAX_BATCH", 500, 1),
            batch_seconds=read.positive("DISPATCH_BATCH_SECONDS", 2.0),
            safety_margin_seconds=read.positive("DISPATCH_SAFETY_MARGIN_SECONDS", 5.0),
            shutdown_grace_seconds=grace,
            idle_wait=read.flag("DISPATCH_IDLE_WAIT", production),
            idle_poll_seconds=read.positive("DISPATCH_IDLE_POLL_SECONDS", 0.25),
            sms_max_per_hour=sms_max,
            failures=reports.failures,
            pacing=sections.pacing(read),
            fanout=sections.fanout(read, production),
            messages=MessageConfig(
                product_name=product,
                email_from=email_from,
                code_digits=digits,
                link_base=read.text("VERIFY_LINK_BASE") or "http://localhost:8082/",
            ),
        ),
        retry=retry,
        channels=sections.channels(
            read, production, local_dir, email_from, send_timeout, max(concurrency.values()), reports
        ),
        reconciler=sections.reconciler(read, retry, deployment, timeout),
        signals=SignalsConfig(
            window_seconds=read.positive("SIGNALS_WINDOW_SECONDS", 300.0),
            # a fraction of the link TTL: time left to act before links expire unsent (docs/runbook.md)
            ready_age_alert_seconds=read.positive("READY_AGE_ALERT_SECONDS", READY_AGE_TTL_FRACTION * ttl),
            ttl_seconds=ttl,
            watermark_stale_seconds=read.positive("RECONCILE_STALE_SECONDS", 300.0),
            sms_max_per_hour=sms_max,
            awaiting_report_alert_seconds=(  # issue 13: only where provider reports are expected
                read.positive("ACCEPTED_UNDELIVERED_AGE_ALERT_SECONDS", 900.0) if reports.public_url else None
            ),
        ),
        auth=sections.auth(read, production),
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


def _check_across(read: Reader, config: Config) -> None:
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


def _return_url(read: Reader, production: bool) -> ReturnUrlConfig:
    """RETURN_URL_ALLOWED_ORIGINS (issue 12): the origins create's return_url may point at."""
    origins = read.attempt(lambda: parse_allowed_origins(read.text("RETURN_URL_ALLOWED_ORIGINS"), production), None)
    return ReturnUrlConfig(production=production, allowed_origins=origins or frozenset())


def _migrations(read: Reader) -> MigrationConfig:
    try:
        return MigrationConfig.from_env(read.env)
    except ValueError as exc:  # its own parser names the variable
        read.fail(str(exc))
        return MigrationConfig()


def _logging(read: Reader, deployment: str) -> LoggingConfig:
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


def _tokens(read: Reader, production: bool, local_dir: Path, target: str | None) -> TokenConfig:
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


def _abuse(read: Reader, production: bool, target: str | None) -> abuse.AbuseConfig:
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
    suppressed = read.choice("SUPPRESSED_ANSWER", d.suppressed_answer, {"refuse", "silent"})
    return abuse.AbuseConfig(
        sms_allowed_countries=countries or d.sms_allowed_countries,
        sms_allowed_number_types=types or d.sms_allowed_number_types,
        per_account_per_hour=read.integer("RATE_LIMIT_ACCOUNT_PER_HOUR", d.per_account_per_hour, 1),
        per_prefix_per_hour=read.integer("RATE_LIMIT_PREFIX_PER_HOUR", d.per_prefix_per_hour, 1),
        per_country_per_hour=read.integer("RATE_LIMIT_COUNTRY_PER_HOUR", d.per_country_per_hour, 1),
        per_client_per_hour=read.integer("RATE_LIMIT_CLIENT_PER_HOUR", d.per_client_per_hour, 1),
        plus_tag_domains=plus,
        coarse_retry_after=coarse,
        suppressed_answer=suppressed,
    )


def _word_set(raw: str | None, upper: bool) -> frozenset[str] | None:
    """'a, b' -> {'a', 'b'} (case-normalised); unset or blank -> None."""
    words = frozenset((w.strip().upper() if upper else w.strip().lower()) for w in (raw or "").split(",") if w.strip())
    return words or None
