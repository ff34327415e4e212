"""Configuration read once from the environment, with local defaults that work with nothing set.

Every setting is an environment variable (documented in README.md).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ..outbox.policy import RetryPolicy

REPO_ROOT = Path(__file__).resolve().parents[3]


class ConfigError(ValueError):
    """A setting is missing or malformed; the message names the variable."""


def _int(env: Mapping[str, str], name: str, default: int, minimum: int = 0) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value}")
    return value


def _float(env: Mapping[str, str], name: str, default: float, minimum: float = float("-inf")) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None
    if value < minimum:
        raise ConfigError(f"{name} must be >= {minimum:g}, got {raw}")
    return value


def _positive(env: Mapping[str, str], name: str, default: float) -> float:
    value = _float(env, name, default)
    if value <= 0:
        raise ConfigError(f"{name} must be > 0, got {value}")
    return value


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = (env.get(name) or "").strip().lower()
    if not raw:
        return default
    if raw in {"1", "true", "yes", "on"}:
        return True
    if raw in {"0", "false", "no", "off"}:
        return False
    raise ConfigError(f"{name} must be true or false, got {raw!r}")


def _retry_policy(env: Mapping[str, str]) -> RetryPolicy:
    try:
        return RetryPolicy.from_env(env)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _choice(env: Mapping[str, str], name: str, default: str, choices: set[str]) -> str:
    value = env.get(name) or default
    if value not in choices:
        raise ConfigError(f"{name} must be one of {sorted(choices)}, got {value!r}")
    return value


def _file(env: Mapping[str, str], name: str) -> str | None:
    path = env.get(name) or None
    if path is not None and not Path(path).is_file():
        raise ConfigError(f"{name} must name a readable file, got {path!r}")
    return path


def _sender_domain(mailbox: str) -> str:
    from email.utils import parseaddr

    return parseaddr(mailbox)[1].rpartition("@")[2].lower().rstrip(".")


@dataclass(frozen=True)
class Settings:
    environment: str = "local"  # local | production
    deployment: str = "local"
    # Secrets (repr=False): a logged or printed Settings never shows them.
    database_url: str | None = field(default=None, repr=False)  # may carry a password
    instance_connection_name: str | None = None
    # With INSTANCE_CONNECTION_NAME (Cloud SQL connector, IAM auth): the IAM principal and database.
    db_user: str | None = None
    db_name: str = "verification"
    statement_timeout_ms: int = 15_000  # a stuck query cannot hold a lease or a request forever
    local_dir: Path = REPO_ROOT / ".local"

    # Tokens: comma-separated `key_id:base64url-secret`, first one is the signing key.
    token_keys: str | None = field(default=None, repr=False)
    verification_ttl_seconds: int = 600  # ASVS 5.0 6.5.5: out-of-band codes live <= 10 min
    sms_code_digits: int = 6
    max_confirm_attempts: int = 5

    # Idempotency and rate limits.
    idempotency_ttl_seconds: int = 24 * 3600
    rate_limit_per_hour: int = 5
    rate_limit_spacing_seconds: int = 60
    max_body_bytes: int = 16 * 1024

    # Delivery.
    max_delivery_attempts: int = 5
    function_timeout_seconds: int = 60
    verify_link_base: str = "http://localhost:8082/"
    email_transport: str = "console"
    sms_transport: str = "console"
    email_from: str = "Signup <no-reply@localhost>"
    smtp_host: str = "localhost"
    smtp_port: int = 8025
    smtp_username: str | None = None
    smtp_password: str | None = field(default=None, repr=False)
    smtp_security: str = "none"
    smtp_ca_file: str | None = None  # a private CA trusted for SMTP TLS, in addition to the system store
    sendgrid_api_key: str | None = field(default=None, repr=False)
    sendgrid_api_url: str = "https://api.sendgrid.com/v3/mail/send"
    twilio_account_sid: str | None = None
    twilio_auth_token: str | None = field(default=None, repr=False)
    twilio_from: str | None = None
    twilio_api_url: str = "https://api.twilio.com"
    # Dispatch: the delivery worker (README, "Dispatch configuration").
    product_name: str = "Example"
    send_concurrency: int = 8  # provider calls in flight per invocation
    send_timeout_seconds: float = 10.0  # per provider call, also capped by the invocation's deadline
    dispatch_max_batch: int = 500
    dispatch_batch_seconds: float = 2.0  # sends of one batch should take about this long
    dispatch_safety_margin_seconds: float = 5.0  # kept free at the end of FUNCTION_TIMEOUT_SECONDS
    shutdown_grace_seconds: float = 8.0  # after SIGTERM, in-flight sends may finish within this
    # An empty outbox does not end the invocation: it polls until near its deadline, so new work is
    # sent within ~a poll interval instead of at the next scheduler tick (on by default in production).
    dispatch_idle_wait: bool = False
    dispatch_idle_poll_seconds: float = 0.25
    # Settle each batch on a second database connection while the next batch is claimed (two
    # PostgreSQL backends busy instead of one). Opt-in: its gain was not clear on the shared 2-core
    # bench machine (docs/benchmarks.md), and it costs a second connection per dispatch instance.
    dispatch_settle_connection: bool = False
    retry_policy: RetryPolicy = field(default_factory=RetryPolicy)
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def is_production(self) -> bool:
        return self.environment == "production"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Settings":
        env = os.environ if env is None else env
        local_dir = Path(env.get("VERIFY_LOCAL_DIR") or REPO_ROOT / ".local")
        return cls(
            environment=_choice(env, "ENVIRONMENT", "local", {"local", "production"}),
            deployment=env.get("DEPLOYMENT") or "local",
            database_url=env.get("DATABASE_URL") or None,
            instance_connection_name=env.get("INSTANCE_CONNECTION_NAME") or None,
            db_user=env.get("DB_USER") or None,
            db_name=env.get("DB_NAME") or "verification",
            statement_timeout_ms=_int(env, "DATABASE_STATEMENT_TIMEOUT_MS", 15_000, 100),
            local_dir=local_dir,
            token_keys=env.get("TOKEN_KEYS") or None,
            verification_ttl_seconds=_int(env, "VERIFICATION_TTL_SECONDS", 600, 30),
            sms_code_digits=_int(env, "SMS_CODE_DIGITS", 6, 6),
            max_confirm_attempts=_int(env, "MAX_CONFIRM_ATTEMPTS", 5, 1),
            idempotency_ttl_seconds=_int(env, "IDEMPOTENCY_TTL_SECONDS", 24 * 3600, 60),
            rate_limit_per_hour=_int(env, "RATE_LIMIT_PER_HOUR", 5, 1),
            rate_limit_spacing_seconds=_int(env, "RATE_LIMIT_SPACING_SECONDS", 60, 0),
            max_body_bytes=_int(env, "MAX_BODY_BYTES", 16 * 1024, 256),
            max_delivery_attempts=_int(env, "MAX_DELIVERY_ATTEMPTS", 5, 1),
            function_timeout_seconds=_int(env, "FUNCTION_TIMEOUT_SECONDS", 60, 5),
            verify_link_base=env.get("VERIFY_LINK_BASE") or "http://localhost:8082/",
            email_transport=_choice(env, "EMAIL_TRANSPORT", "console", {"smtp", "sendgrid", "console"}),
            sms_transport=_choice(env, "SMS_TRANSPORT", "console", {"twilio", "console"}),
            email_from=env.get("EMAIL_FROM") or "Signup <no-reply@localhost>",
            smtp_host=env.get("SMTP_HOST") or "localhost",
            smtp_port=_int(env, "SMTP_PORT", 8025, 1),
            smtp_username=env.get("SMTP_USERNAME") or None,
            smtp_password=env.get("SMTP_PASSWORD") or None,
            smtp_security=_choice(env, "SMTP_SECURITY", "none", {"none", "starttls", "tls"}),
            smtp_ca_file=_file(env, "SMTP_CA_FILE"),
            sendgrid_api_key=env.get("SENDGRID_API_KEY") or None,
            sendgrid_api_url=env.get("SENDGRID_API_URL") or "https://api.sendgrid.com/v3/mail/send",
            twilio_account_sid=env.get("TWILIO_ACCOUNT_SID") or None,
            twilio_auth_token=env.get("TWILIO_AUTH_TOKEN") or None,
            twilio_from=env.get("TWILIO_FROM") or None,
            twilio_api_url=env.get("TWILIO_API_URL") or "https://api.twilio.com",
            product_name=env.get("PRODUCT_NAME") or "Example",
            send_concurrency=_int(env, "SEND_CONCURRENCY", 8, 1),
            send_timeout_seconds=_positive(env, "SEND_TIMEOUT_SECONDS", 10.0),
            dispatch_max_batch=_int(env, "DISPATCH_MAX_BATCH", 500, 1),
            dispatch_batch_seconds=_positive(env, "DISPATCH_BATCH_SECONDS", 2.0),
            dispatch_safety_margin_seconds=_positive(env, "DISPATCH_SAFETY_MARGIN_SECONDS", 5.0),
            shutdown_grace_seconds=_positive(env, "SHUTDOWN_GRACE_SECONDS", 8.0),
            dispatch_idle_wait=_flag(env, "DISPATCH_IDLE_WAIT", env.get("ENVIRONMENT") == "production"),
            dispatch_idle_poll_seconds=_positive(env, "DISPATCH_IDLE_POLL_SECONDS", 0.25),
            dispatch_settle_connection=_flag(env, "DISPATCH_SETTLE_CONNECTION", False),
            retry_policy=_retry_policy(env),
            extra={k: v for k, v in env.items() if k.startswith("VERIFY_")},
        ).validated()

    def validated(self) -> "Settings":
        """Checks across settings, at start-up: a bad combination refuses to start, never fails sends."""
        # Only where email is really sent (a production console transport is refused anyway, and
        # deploy-time commands such as `verifyctl migrate` carry no sender).
        sends_email = self.is_production and self.email_transport != "console"
        if sends_email and _sender_domain(self.email_from) in ("localhost", ""):
            raise ConfigError(f"EMAIL_FROM must be a real sender address in production, not {self.email_from!r}")
        return self  # PRODUCT_NAME against the SMS templates: delivery.messages.check_sms_budget, at start-up
