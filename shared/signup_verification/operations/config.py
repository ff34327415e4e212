"""The settings of the scheduled runs, dispatch (README "Dispatch") and the reconciler, and of the
signals they close with (README "Reconcile, signals and logs"); each declared once, platform/settings.py.

River's rescuer model: defaults that are safe for a service nobody has tuned yet, each overridable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..delivery.capacity_config import FanoutConfig, PacingConfig
from ..delivery.config import (
    DELIVERY_REPORTS_URL,
    SEND_LIMITS,
    SEND_TIMEOUT,
    SMS_MAX_PER_HOUR,
    SMS_TRANSPORT,
    TWILIO_ACCOUNT_SID,
    TWILIO_API_URL,
    TWILIO_AUTH_TOKEN,
    TWILIO_VOICE_FROM,
    TWILIO_WHATSAPP_FROM,
    VOICE_MAX_PER_HOUR,
    MessageConfig,
    SendLimit,
)
from ..outbox.config import FailurePolicy, NudgeConfig, RetryPolicy
from ..platform.config import DEPLOYMENT, FUNCTION_TIMEOUT, SHUTDOWN_GRACE, production_flag
from ..platform.errors import ConfigError
from ..platform.settings import Env, Setting, each, number, part, setting
from ..verifications.config import TWILIO_FROM, VERIFICATION_TTL, VOICE_TRANSPORT, WHATSAPP_TRANSPORT

DAY = 86_400
READY_AGE_TTL_FRACTION = 0.2  # READY_AGE_ALERT_SECONDS defaults to this share of VERIFICATION_TTL_SECONDS
TWILIO_LOOKUP = Setting(
    "TWILIO_LOOKUP",
    True,
    aliases=("SMS_LOOKUP",),
    help="with a channel sent through Twilio (`SMS_TRANSPORT`, `WHATSAPP_TRANSPORT` or `VOICE_TRANSPORT` `=twilio`) "
    "and its credentials, the reconciler asks Twilio's Messages or Calls list API about that channel's ambiguous "
    "sends (docs/deploy.md); `off`: they follow the hold policy",
)
WHATSAPP_PREFIX = "whatsapp:"  # how Twilio addresses a WhatsApp number (delivery/channels/twilio_whatsapp.py)


def _whole(raw: str, env: Env) -> int:
    return int(number(raw))


def _twilio_lookups(env: Env) -> bool:
    credentials = env(TWILIO_ACCOUNT_SID) and env(TWILIO_AUTH_TOKEN)
    on_twilio = "twilio" in (env(SMS_TRANSPORT), env(WHATSAPP_TRANSPORT), env(VOICE_TRANSPORT))
    return on_twilio and bool(credentials) and env(TWILIO_LOOKUP)


@dataclass(frozen=True)
class TwilioLookupConfig:
    """Ambiguous SMS, WhatsApp messages and calls resolved by asking Twilio's Messages or Calls list API
    (lookup_ambiguous_twilio.py): set when a channel is sent through Twilio with its credentials, unless
    TWILIO_LOOKUP is off. One budget of list requests for the three channels: one account's API."""

    account_sid: str = TWILIO_ACCOUNT_SID.field(view=lambda sid: sid or "")
    auth_token: str = TWILIO_AUTH_TOKEN.field(view=lambda token: token or "")
    api_url: str = TWILIO_API_URL.field()
    sms_transport: str = SMS_TRANSPORT.field()
    whatsapp_transport: str = WHATSAPP_TRANSPORT.field()
    voice_transport: str = VOICE_TRANSPORT.field()
    sender: str = TWILIO_FROM.field(view=lambda sender: sender or "")  # an MG... Messaging Service: To only
    whatsapp_sender: str = TWILIO_WHATSAPP_FROM.field(view=lambda sender: sender or "")
    caller_id: str = TWILIO_VOICE_FROM.field(view=lambda caller: caller or "")  # unset: a TWILIO_FROM number
    max_calls: int = setting(
        "TWILIO_LOOKUP_MAX_CALLS",
        20,
        minimum=0,
        aliases=("SMS_LOOKUP_MAX_CALLS",),
        help="list requests per reconcile run",
    )
    timeout_seconds: float = setting(
        "TWILIO_LOOKUP_TIMEOUT_SECONDS", 5.0, above=0, aliases=("SMS_LOOKUP_TIMEOUT_SECONDS",), help="per list request"
    )
    min_interval_seconds: float = setting(
        "TWILIO_LOOKUP_INTERVAL_SECONDS",
        0.2,
        minimum=0,
        aliases=("SMS_LOOKUP_INTERVAL_SECONDS",),
        help="between two requests (Twilio's API rate limits)",
    )
    settle_seconds: float = setting(
        "TWILIO_LOOKUP_SETTLE_SECONDS",
        120.0,
        above=0,
        aliases=("SMS_LOOKUP_SETTLE_SECONDS",),
        help="after this long since the attempt, a message or call absent from the listing was never created: "
        "retried once",
    )
    window_seconds: float = 300.0  # a message or call created this long after the attempt began is still ours

    def senders(self) -> dict[str, str]:
        """Each channel sent through Twilio -> the `From` its listing filters on, as Twilio writes it
        ('': `To` only, for a Messaging Service, which has no one number)."""
        found = {}
        if self.sms_transport == "twilio":
            found["sms"] = "" if self.sender.startswith("MG") else self.sender
        if self.whatsapp_transport == "twilio":
            number = self.whatsapp_sender.removeprefix(WHATSAPP_PREFIX)
            found["whatsapp"] = "" if number.startswith("MG") else WHATSAPP_PREFIX + number
        if self.voice_transport == "twilio":  # calls have no Messaging Service
            found["voice"] = self.caller_id or (self.sender if self.sender.startswith("+") else "")
        return found


@dataclass(frozen=True)
class ReconcilerConfig:
    # Bounded batches: each statement moves at most batch_size rows, each duty runs at most
    # max_batches statements per run; what is left is picked up by the next run (and reported).
    batch_size: int = setting(
        "RECONCILE_BATCH_SIZE", 500, parse=_whole, minimum=1, help="rows per statement of a reconciler duty"
    )
    max_batches: int = setting("RECONCILE_MAX_BATCHES", 20, parse=_whole, minimum=1, help="statements per duty per run")
    # The scheduler fires once a minute and one invocation drains until its budget, so 2 minutes.
    polling_horizon_seconds: float = setting(
        "POLLING_HORIZON_SECONDS",
        120.0,
        minimum=1,
        help="eligible work older than this is reported as overdue (the worker is not keeping up or not running)",
    )
    # Evidence retention (set by legal/security owners): the destination is removed from a finished
    # verification, then the verification, its intent and its attempt history are deleted.
    redact_after_seconds: float = setting(
        "RETENTION_REDACT_AFTER_DAYS",
        30 * DAY,
        unit=DAY,
        minimum=0,
        help="evidence retention (policy: set by legal/security): a finished verification's destination is removed",
    )
    purge_after_seconds: float = setting(
        "RETENTION_PURGE_AFTER_DAYS",
        90 * DAY,
        unit=DAY,
        minimum=0,
        help="then (at least `RETENTION_REDACT_AFTER_DAYS`) the verification and its whole history are deleted",
    )
    safety_margin_seconds: float = setting(
        "RECONCILE_SAFETY_MARGIN_SECONDS",
        10.0,
        minimum=0,
        help="no new batch starts this close to `FUNCTION_TIMEOUT_SECONDS`",
    )
    policy: RetryPolicy = part(RetryPolicy)  # the dispatcher's retry/ambiguity policy
    deployment: str = DEPLOYMENT.field()  # whose rows, whose watermark
    function_timeout_seconds: float = FUNCTION_TIMEOUT.field(view=float)  # the run's time budget
    twilio_lookup: TwilioLookupConfig | None = part(TwilioLookupConfig, when=_twilio_lookups)  # None: none

    def __post_init__(self) -> None:
        if self.purge_after_seconds < self.redact_after_seconds:
            raise ConfigError(
                "RETENTION_PURGE_AFTER_DAYS must be >= RETENTION_REDACT_AFTER_DAYS "
                "(history is redacted first, then purged)"
            )


@dataclass(frozen=True)
class SignalsConfig:
    window_seconds: float = setting(
        "SIGNALS_WINDOW_SECONDS", 300.0, above=0, help="window of the attempts-by-outcome counts"
    )
    ready_age_alert_seconds: float = setting(
        "READY_AGE_ALERT_SECONDS",
        READY_AGE_TTL_FRACTION * VERIFICATION_TTL.default,
        above=0,
        default_for=lambda env: READY_AGE_TTL_FRACTION * env(VERIFICATION_TTL),
        shown_default="a fifth of `VERIFICATION_TTL_SECONDS` (`120`)",
        help="`status` alerts when the oldest ready verification waited longer (the page): time left to act "
        "before links expire unsent",
    )
    ttl_seconds: float = VERIFICATION_TTL.field()  # a backlog that drains slower than this expires unsent
    watermark_stale_seconds: float = setting(
        "RECONCILE_STALE_SECONDS",
        300.0,
        above=0,
        help="`status` alerts when the reconciler has not advanced for longer (infra's alert uses the same)",
    )
    sms_max_per_hour: int | None = SMS_MAX_PER_HOUR.field()  # the global SMS budget (alert once spent)
    voice_max_per_hour: int | None = VOICE_MAX_PER_HOUR.field()  # the call budget (alert once spent)
    awaiting_report_alert_seconds: float | None = setting(
        "ACCEPTED_UNDELIVERED_AGE_ALERT_SECONDS",
        900.0,
        above=0,
        when=lambda env: env(DELIVERY_REPORTS_URL) is not None,
        shown_default="`900` with `DELIVERY_REPORTS_URL`, else no alert",
        help="an accepted delivery without a delivered report for longer pages (only where reports are expected)",
    )


@dataclass(frozen=True)
class DispatchConfig:
    """One dispatch run's settings (operations/dispatcher.py), every part it reads included."""

    deployment: str = DEPLOYMENT.field()  # names the heartbeat and the lease owners
    production: bool = production_flag()  # fault injection is never armed in production
    function_timeout_seconds: float = FUNCTION_TIMEOUT.field()
    send_limits: Mapping[str, SendLimit] = each(SendLimit, SEND_LIMITS)
    send_timeout_seconds: float = SEND_TIMEOUT.field()
    max_batch: int = setting("DISPATCH_MAX_BATCH", 500, minimum=1, help="upper bound on one claim")
    batch_seconds: float = setting(
        "DISPATCH_BATCH_SECONDS",
        2.0,
        above=0,
        help="each batch is sized from the measured send latency so its sends take about this long",
    )
    safety_margin_seconds: float = setting(
        "DISPATCH_SAFETY_MARGIN_SECONDS", 5.0, above=0, help="kept free at the end (at most a quarter of the timeout)"
    )
    shutdown_grace_seconds: float = SHUTDOWN_GRACE.field()
    idle_wait: bool = setting(
        "DISPATCH_IDLE_WAIT",
        False,
        default_for=lambda env: env.production,
        shown_default="`true` in production, else `false`",
        help="when the outbox is empty, keep polling it until near the deadline instead of returning, so new work "
        "is sent within about a poll interval rather than at the next minute's tick; costs one instance kept busy "
        'per deployment (`docs/benchmarks.md`, "Keeping an invocation open"). Works with `verifyctl dev`\'s '
        "scheduler emulation (each call then lasts about `FUNCTION_TIMEOUT_SECONDS`)",
    )
    idle_poll_seconds: float = setting(
        "DISPATCH_IDLE_POLL_SECONDS",
        0.25,
        above=0,
        help="how often an idle invocation looks for work (an empty claim is one probe of the eligible partial index)",
    )
    # Past it the claim takes no SMS (nor WhatsApp) intent until the next hour or `verifyctl sms resume`.
    sms_max_per_hour: int | None = SMS_MAX_PER_HOUR.field()
    # Past it the claim takes no voice intent until the next hour or `verifyctl voice resume`.
    voice_max_per_hour: int | None = VOICE_MAX_PER_HOUR.field()
    messages: MessageConfig = part(MessageConfig)  # what the rendered messages say
    failures: FailurePolicy = part(FailurePolicy)  # suppression and channel holds
    pacing: PacingConfig = part(PacingConfig)  # the providers' rates
    fanout: FanoutConfig = part(FanoutConfig)  # more invocations for a backlog
    nudge: NudgeConfig = part(NudgeConfig)  # whose nudges the dispatch target accepts
    retry: RetryPolicy = part(RetryPolicy)  # when a settled intent is tried again
    signals: SignalsConfig = part(SignalsConfig)  # the records the run closes with

    def concurrency(self, channel: str) -> int:
        """The most sends of `channel` in flight in this invocation."""
        limit = self.send_limits.get(channel)
        return limit.max_in_flight if limit is not None else 1
