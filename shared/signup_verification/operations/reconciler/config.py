"""The reconciler's explicit configuration: every knob, its default, and the variable that sets it
(signup_verification/config/ reads them).

River's rescuer model: defaults that are safe for a service nobody has tuned yet, each overridable.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...outbox.policy import RetryPolicy
from ...platform.errors import ConfigError

DAY = 86_400


@dataclass(frozen=True)
class SmsLookupConfig:
    """Ambiguous SMS resolved by asking Twilio's Messages list API (issue 13, lookup_ambiguous_sms.py).
    Set when SMS_TRANSPORT=twilio with credentials (SMS_LOOKUP=off disables it)."""

    account_sid: str
    auth_token: str = field(repr=False)
    sender: str = ""  # TWILIO_FROM (a Messaging Service SID MG...: matched on To only)
    api_url: str = "https://api.twilio.com"  # TWILIO_API_URL
    max_calls: int = 20  # SMS_LOOKUP_MAX_CALLS: list requests per run
    timeout_seconds: float = 5.0  # SMS_LOOKUP_TIMEOUT_SECONDS: per request
    min_interval_seconds: float = 0.2  # SMS_LOOKUP_INTERVAL_SECONDS: the rate budget (Twilio's API limits)
    settle_seconds: float = 120.0  # SMS_LOOKUP_SETTLE_SECONDS: after this, absent from the listing = never created
    window_seconds: float = 300.0  # a message created this long after the attempt began is still ours


@dataclass(frozen=True)
class ReconcilerConfig:
    # Bounded batches: each statement moves at most batch_size rows, each duty runs at most
    # max_batches statements per run; what is left is picked up by the next run (and reported).
    batch_size: int = 500
    max_batches: int = 20
    # Eligible work older than this means the worker is not keeping up or not running: the
    # scheduler fires once a minute and one invocation drains until its budget, so 2 minutes.
    polling_horizon_seconds: float = 120.0
    # Evidence retention (set by legal/security owners): the destination is removed from a
    # finished verification after redact_after_seconds; the verification, its intent and its
    # attempt history are deleted after purge_after_seconds (>= redact_after_seconds).
    redact_after_seconds: float = 30 * DAY
    purge_after_seconds: float = 90 * DAY
    # Stop starting batches when this much of the function's time budget is left.
    safety_margin_seconds: float = 10.0
    policy: RetryPolicy = field(default_factory=RetryPolicy)  # the dispatcher's retry/ambiguity policy
    deployment: str = "local"  # DEPLOYMENT: whose rows, whose watermark
    function_timeout_seconds: float = 60.0  # FUNCTION_TIMEOUT_SECONDS: the run's time budget
    sms_lookup: SmsLookupConfig | None = None  # issue 13: None = no lookups (ambiguous SMS follow the policy)

    def __post_init__(self) -> None:
        if self.purge_after_seconds < self.redact_after_seconds:
            raise ConfigError(
                "RETENTION_PURGE_AFTER_DAYS must be >= RETENTION_REDACT_AFTER_DAYS "
                "(history is redacted first, then purged)"
            )
