"""The configuration's readers for the delivery and operations concerns and the edge's caller checks: one
function per concern, each reading its variables from a reader.Reader and recording what is
wrong there (config.load raises every problem at once)."""

from __future__ import annotations

import re
from pathlib import Path

from ..api.auth import GUARDED_TARGETS, AuthConfig, SigningKey, parse_signing_keys
from ..api.delivery_reports_config import DeliveryReportsConfig
from ..delivery.channel_config import ChannelsConfig, SendGridConfig, SmtpConfig, TwilioConfig
from ..delivery.config import (
    CHANNELS,
    DEFAULT_EMAIL_MAX_PER_SECOND,
    DEFAULT_SEND_CONCURRENCY_MAX,
    DEFAULT_SMS_MAX_PER_SECOND,
    FanoutConfig,
    PacingConfig,
    documented_sender_mps,
)
from ..delivery.message_config import message_domain
from ..delivery.webhook_config import DEFAULT_EVENT_TYPES, WebhookConfig, check_url, parse_events, parse_secrets
from ..operations.reconciler.config import DAY, ReconcilerConfig, SmsLookupConfig
from ..outbox.failure_policy import FailurePolicy
from ..outbox.policy import ChannelPolicy, RetryPolicy
from .reader import Reader


def retry_policy(read: Reader) -> RetryPolicy:
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


def channels(
    read: Reader,
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
        webhook=webhook(read, production),
    )


def webhook(read: Reader, production: bool) -> WebhookConfig:
    """Issue 12: WEBHOOK_URL turns events on (every target that changes a verification writes them);
    WEBHOOK_SECRET is needed where they are sent (dispatch: build_channels says so)."""
    url = read.text("WEBHOOK_URL")
    raw_secret = read.text("WEBHOOK_SECRET")
    raw_events = read.text("WEBHOOK_EVENTS")
    no_secrets: tuple[bytes, ...] = ()
    return WebhookConfig(
        url=read.attempt(lambda: check_url(url, production), None) if url else None,
        secrets=read.attempt(lambda: parse_secrets(raw_secret), no_secrets) if raw_secret else no_secrets,
        max_attempts=read.integer("WEBHOOK_MAX_ATTEMPTS", WebhookConfig.max_attempts, 1),
        events=read.attempt(lambda: parse_events(raw_events), DEFAULT_EVENT_TYPES)
        if raw_events
        else DEFAULT_EVENT_TYPES,
    )


def reconciler(read: Reader, retry: RetryPolicy, deployment: str, timeout: float) -> ReconcilerConfig:
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
        sms_lookup=sms_lookup(read),
    )
    return read.attempt(lambda: ReconcilerConfig(**values), d)  # type: ignore[arg-type]


def sms_lookup(read: Reader) -> SmsLookupConfig | None:
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


def reports(read: Reader, production: bool) -> DeliveryReportsConfig:
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
        from ..api import report_signatures

        key = read.attempt(lambda: report_signatures.sendgrid_public_key(raw_key), None)
    return DeliveryReportsConfig(
        public_url=url,
        sendgrid_key=key,
        twilio_auth_token=read.text("TWILIO_AUTH_TOKEN"),
        tolerance_seconds=read.integer("DELIVERY_REPORTS_TOLERANCE_SECONDS", 300, 30),
        max_body_bytes=read.integer("DELIVERY_REPORTS_MAX_BODY_BYTES", 1024 * 1024, 1024),
        failures=failure_policy(read),
    )


def failure_policy(read: Reader) -> FailurePolicy:
    """What a failure for good sets off: SUPPRESSION_DAYS and the channel hold's thresholds."""
    d = FailurePolicy()
    days = read.number("SUPPRESSION_DAYS", 0.0, 0.0)
    return FailurePolicy(
        suppress_days=days or None,
        hold_after=read.integer("CHANNEL_HOLD_AFTER_FAULTS", d.hold_after, 1),
        hold_window_seconds=read.positive("CHANNEL_HOLD_WINDOW_SECONDS", d.hold_window_seconds),
        hold_seconds=read.positive("CHANNEL_HOLD_SECONDS", d.hold_seconds),
    )


def auth(read: Reader, production: bool) -> AuthConfig:
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


def send_concurrency(read: Reader) -> dict[str, int]:
    """SEND_CONCURRENCY_MAX_EMAIL / _SMS / _WEBHOOK, each channel's most sends in flight per
    invocation; SEND_CONCURRENCY sets all three (a per-channel variable wins)."""
    every = read.integer("SEND_CONCURRENCY", 0, 1)
    return {
        channel: read.integer(
            f"SEND_CONCURRENCY_MAX_{channel.upper()}", every or DEFAULT_SEND_CONCURRENCY_MAX[channel], 1
        )
        for channel in CHANNELS
    }


def pacing(read: Reader) -> PacingConfig:
    """EMAIL_MAX_PER_SECOND, SMS_MAX_PER_SECOND and, with Twilio, TWILIO_SENDER_MPS (default: the
    documented rate of TWILIO_FROM's kind of sender)."""
    twilio = read.text("SMS_TRANSPORT") == "twilio"
    mps = read.positive("TWILIO_SENDER_MPS", documented_sender_mps(read.text("TWILIO_FROM")))
    return PacingConfig(
        email_max_per_second=read.positive("EMAIL_MAX_PER_SECOND", DEFAULT_EMAIL_MAX_PER_SECOND),
        sms_max_per_second=read.positive("SMS_MAX_PER_SECOND", DEFAULT_SMS_MAX_PER_SECOND),
        twilio_sender_mps=mps if twilio else None,
    )


_QUEUE = re.compile(r"^projects/[a-z0-9.:-]+/locations/[a-z0-9-]+/queues/[A-Za-z0-9-]+$")


def fanout(read: Reader, production: bool) -> FanoutConfig:
    """DISPATCH_MAX_PARALLEL and where fan-out invocations are started: DISPATCH_FANOUT_URL (the
    dispatch target) through DISPATCH_FANOUT_QUEUE (Cloud Tasks) with DISPATCH_FANOUT_SERVICE_ACCOUNT's
    OIDC token, or, without a queue (never in production), POSTed by the local stand-in."""
    url, queue = read.text("DISPATCH_FANOUT_URL"), read.text("DISPATCH_FANOUT_QUEUE")
    account = read.text("DISPATCH_FANOUT_SERVICE_ACCOUNT")
    if url and not url.startswith(("https://", "http://")):
        read.fail(f"DISPATCH_FANOUT_URL must be an http(s) URL, got {url!r}")
        url = None
    if queue and not _QUEUE.match(queue):
        read.fail(f"DISPATCH_FANOUT_QUEUE must be projects/PROJECT/locations/LOCATION/queues/QUEUE, got {queue!r}")
        queue = None
    if (queue or account) and not url:
        read.fail("DISPATCH_FANOUT_QUEUE and DISPATCH_FANOUT_SERVICE_ACCOUNT need DISPATCH_FANOUT_URL")
    if queue and not account:
        read.fail("DISPATCH_FANOUT_QUEUE needs DISPATCH_FANOUT_SERVICE_ACCOUNT (the tasks' OIDC identity)")
    if production and url and not (queue and url.startswith("https://")):
        read.fail("in production DISPATCH_FANOUT_URL must be https and go through DISPATCH_FANOUT_QUEUE")
        url = None
    return FanoutConfig(
        max_parallel=read.integer("DISPATCH_MAX_PARALLEL", FanoutConfig.max_parallel, 0),
        drain_seconds=read.positive("DISPATCH_FANOUT_DRAIN_SECONDS", FanoutConfig.drain_seconds),
        queue=queue,
        url=url,
        service_account=account,
    )
