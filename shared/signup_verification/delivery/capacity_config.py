"""How fast and how wide delivery sends: the providers' rates (pacing.py) and the fan-out to more
invocations (fanout.py); README "Dispatch", each declared once (platform/settings.py). Both are parts
of the dispatch run's settings, operations/config.py's DispatchConfig.

Light on purpose, like config.py beside it. The defaults of the provider limits and the reasons for
each are in docs/capacity.md ("The dispatcher's ceiling").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..platform.config import CLOUD_TASKS_API, production_flag
from ..platform.errors import ConfigError
from ..platform.settings import number, plain, setting
from ..platform.tasks import queue_name, target_url
from ..verifications.config import TWILIO_FROM
from .config import SMS_TRANSPORT

# Twilio's documented message segments per second by sender kind (errors 30001 and 21611): a US
# long code 1, a toll-free number 3, a short code about 100. A Messaging Service sends at the sum of
# its senders, which only its owner knows: it counts as one long code until TWILIO_SENDER_MPS says more.
TOLL_FREE = re.compile(r"^\+1(800|833|844|855|866|877|888)\d{7}$")
SHORT_CODE = re.compile(r"^\d{5,6}$")


def documented_sender_mps(sender: str | None) -> float:
    """Twilio's documented segments per second for TWILIO_FROM's kind of sender."""
    sender = (sender or "").strip()
    if SHORT_CODE.match(sender):
        return 100.0
    if TOLL_FREE.match(sender):
        return 3.0
    return 1.0


@dataclass(frozen=True)
class PacingConfig:
    """What the providers accept. Each invocation takes its share of every rate (the fan-out's
    invocations divide it); a 429 slows the channel for every invocation (delivery/pacing.py)."""

    # SendGrid documented up to 10,000 requests per second for v3 mail send; its rate-limit page now
    # names no figure and signals the limit with 429 and X-RateLimit-Reset, which pacing follows.
    email_max_per_second: float = setting(
        "EMAIL_MAX_PER_SECOND",
        10_000.0,
        above=0,
        help="emails per second the deployment may send, shared by its invocations (SendGrid's documented "
        "mail-send limit; lower it for an SMTP relay's). A 429 slows the channel for every invocation by its "
        '`Retry-After` and spends no attempt (docs/capacity.md, "Provider pacing")',
    )
    # Twilio documents no account-wide request rate for Messages, only per-sender rates; the fastest,
    # a short code, is about 100 segments per second.
    sms_max_per_second: float = setting(
        "SMS_MAX_PER_SECOND", 100.0, above=0, help="Twilio Messages API requests per second, shared by the invocations"
    )
    twilio_sender_mps: float | None = setting(
        "TWILIO_SENDER_MPS",
        1.0,
        parse=plain(number),
        above=0,
        default_for=lambda env: documented_sender_mps(env(TWILIO_FROM)),
        when=lambda env: env(SMS_TRANSPORT) == "twilio",  # elsewhere: None, no sender limit
        shown_default="by `TWILIO_FROM`'s kind",
        help="message segments per second the Twilio sender may send (Twilio queues beyond it): a long code 1, "
        "toll-free 3, a short code 100; set it for a Messaging Service (the sum of its senders) or a registered "
        "10DLC number",
    )

    # Meta's default throughput of a WhatsApp Business number is 80 messages per second.
    whatsapp_max_per_second: float = setting(
        "WHATSAPP_MAX_PER_SECOND",
        80.0,
        above=0,
        help="WhatsApp messages per second, shared by the invocations (Meta's default throughput of a business "
        "number; raise it when Meta raised yours)",
    )
    # Twilio places an account's calls at its CPS (calls per second), 1 unless raised.
    voice_calls_per_second: float = setting(
        "VOICE_CALLS_PER_SECOND",
        1.0,
        above=0,
        help="calls per second the deployment may place, shared by the invocations (Twilio's CPS: 1 unless the "
        "account's was raised; a call past it waits in Twilio's queue)",
    )

    def requests_per_second(self, channel: str) -> float | None:
        return {
            "email": self.email_max_per_second,
            "sms": self.sms_max_per_second,
            "whatsapp": self.whatsapp_max_per_second,
            "voice": self.voice_calls_per_second,
        }.get(channel)


@dataclass(frozen=True)
class FanoutConfig:
    """More dispatch invocations when one is not enough (delivery/fanout.py, platform/tasks.py)."""

    max_parallel: int = setting(
        "DISPATCH_MAX_PARALLEL",
        4,
        minimum=0,
        help="fan-out invocations at once (the queue's `max_concurrent_dispatches`; each holds one database "
        "connection, counted in infra's budget); `0`: no fan-out",
    )
    url: str | None = setting(
        "DISPATCH_FANOUT_URL",
        None,
        parse=target_url,
        shown_default="unset (`verifyctl dev`: its dispatch target)",
        help="the dispatch target's URL: with it, a scheduled invocation whose backlog is more than it can send in "
        "`DISPATCH_FANOUT_DRAIN_SECONDS` starts more invocations of it (the tasks' target and OIDC audience). "
        "Without a queue the local stand-in POSTs there itself (refused in production)",
    )
    queue: str | None = setting(
        "DISPATCH_FANOUT_QUEUE",
        None,
        parse=queue_name,
        help="`projects/P/locations/L/queues/Q`: start them as Cloud Tasks HTTP tasks (infra sets it)",
    )
    service_account: str | None = setting(
        "DISPATCH_FANOUT_SERVICE_ACCOUNT",
        None,
        help="whose OIDC token the tasks carry (infra sets it; needed with `DISPATCH_FANOUT_QUEUE`)",
    )
    drain_seconds: float = setting(
        "DISPATCH_FANOUT_DRAIN_SECONDS",
        10.0,
        above=0,
        help="fan out when one invocation would take longer than this to send the eligible backlog",
    )
    api_url: str = CLOUD_TASKS_API.field()
    production: bool = production_flag()  # the local stand-in (no queue) is refused there

    def __post_init__(self) -> None:
        problems = []
        if (self.queue or self.service_account) and not self.url:
            problems.append("DISPATCH_FANOUT_QUEUE and DISPATCH_FANOUT_SERVICE_ACCOUNT need DISPATCH_FANOUT_URL")
        if self.queue and not self.service_account:
            problems.append("DISPATCH_FANOUT_QUEUE needs DISPATCH_FANOUT_SERVICE_ACCOUNT (the tasks' OIDC identity)")
        if self.production and self.url and not self.queue:
            problems.append("in production DISPATCH_FANOUT_URL must go through DISPATCH_FANOUT_QUEUE")
        if problems:
            raise ConfigError("; ".join(problems), tuple(problems))

    @property
    def enabled(self) -> bool:
        return bool(self.url) and self.max_parallel > 0
