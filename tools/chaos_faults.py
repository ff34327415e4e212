"""Local providers that misbehave at random, for the chaos run (tools/chaos.py). Loopback only.

Built on the protocol fakes of tests/support/fakes (a real SMTP server, HTTP servers that answer as Twilio
does): while `faults.enabled`, each request draws one fault at the configured rates, otherwise it is
answered normally. Every message the provider *took* is recorded with the wall-clock time it was
taken, including the ones whose answer never reached the worker (timeout, reset after accepting,
a Twilio 5xx that was sent anyway): those are the deliveries a worker cannot know about.
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import hashlib
import random
import re
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.fakes.http import Answer  # noqa: E402
from support.fakes.smtp import FakeSmtpServer, _Handler  # noqa: E402
from support.fakes.twilio import FakeTwilio  # noqa: E402

# The attacker's destinations (tools/chaos_attack.py) and what the providers answer for them, whether
# the run's random faults are on or off: Twilio refuses one range of French numbers for this sender
# (21606), takes another and reports it filtered later (30007, tools/chaos_reports.py); our relay
# refuses the attacker's domain at RCPT, quoting that domain's own server.
REFUSED_PREFIX, FILTERED_PREFIX, ECHO_DOMAIN = "+3361234", "+3361235", "evil.example"


def never_taken(destination: str) -> bool:
    """The attacker's numbers Twilio refuses at submission and the addresses our relay refuses at
    RCPT (tools/chaos_attack.py): no provider ever took a message to them, so none reports one."""
    return destination.startswith(REFUSED_PREFIX) or destination.endswith("@" + ECHO_DOMAIN)


REFUSED_21606 = FakeTwilio.error(
    400,
    21606,
    "The 'From' phone number provided is not a valid message-capable Twilio phone number for this destination",
)
RELAY_ECHO = (
    "550 5.7.1 <{to}>: Recipient address rejected: undeliverable address: host mx.evil.example[192.0.2.66] said: "
    "554 5.7.1 <no-reply@example.org>: Sender address rejected: Relay access denied; Client host rejected"
)
# the link's secret: the 43-character token, after the verification id a link carries
_LINK_TOKEN = re.compile(r"token=(?:[A-Za-z0-9_-]{22})?([A-Za-z0-9_-]{43})(?![A-Za-z0-9_-])")
_SMS_CODE = re.compile(r"\b(\d{6})\b")
_SPOKEN_CODE = re.compile(r"\b(\d(?:, \d){5})\b")  # a call reads the code digit by digit
WHATSAPP = "whatsapp:"


@dataclass(frozen=True)
class Delivered:
    channel: str
    destination: str
    secret: str | None  # the link token or code the message carried (to match it to its verification)
    received_at: float  # time.time() when the provider took the message


@dataclass
class FaultRates:
    timeout: float = 0.04  # message taken, the answer comes after the client's timeout: ambiguous
    reset_after: float = 0.03  # message taken, connection reset without an answer: ambiguous
    reset_before: float = 0.02  # connection reset before the message was taken
    throttle: float = 0.05  # Twilio 429 + Retry-After / SMTP 421: never processed, retryable
    server_error: float = 0.04  # Twilio 5xx (half of them sent anyway): ambiguous; SMTP 451: retryable
    echo_url: float = 0.02  # SMTP only: 451 quoting the message's first URL: retryable
    permanent_every: int = 250  # one destination in N is refused for good (Twilio 21211 / SMTP 550 5.1.1)


@dataclass
class Faults:
    """Shared switch and counters of both providers."""

    rates: FaultRates
    seed: int
    answer_delay: float  # > the workers' SEND_TIMEOUT_SECONDS
    enabled: bool = True
    injected: Counter = field(default_factory=Counter)
    deliveries: list[Delivered] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # The first requests of each channel get one of each fault kind, then they come at random: a run
    # whose workers send little while the faults are on (slow start-ups, kills) still meets every kind.
    forced: dict[str, list[str]] = field(
        default_factory=lambda: {
            channel: ["timeout", "reset_after", "reset_before", "throttle", "server_error"]
            for channel in ("email", "sms")
        }
    )

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def draw(self, channel: str) -> str | None:
        """One fault for the next request, or None."""
        if not self.enabled:
            return None
        r = self.rates
        with self._lock:
            forced = self.forced.get(channel)
            x = self._rng.random()
            if forced:
                self.injected[f"{channel}_{forced[0]}"] += 1
                return forced.pop(0)
        for kind, rate in (
            ("timeout", r.timeout),
            ("reset_after", r.reset_after),
            ("reset_before", r.reset_before),
            ("throttle", r.throttle),
            ("server_error", r.server_error),
            ("echo_url", r.echo_url if channel == "email" else 0.0),
        ):
            if x < rate:
                self.count(f"{channel}_{kind}")
                return kind
            x -= rate
        return None

    def coin(self) -> bool:
        with self._lock:
            return self._rng.random() < 0.5

    def permanent(self, destination: str) -> bool:
        digest = hashlib.sha256(destination.lower().encode()).digest()
        return int.from_bytes(digest[:4], "big") % self.rates.permanent_every == 0

    def count(self, what: str) -> None:
        with self._lock:
            self.injected[what] += 1

    def record(self, delivered: Delivered) -> None:
        with self._lock:
            self.deliveries.append(delivered)


class _Chaotic(dict):
    """FakeTwilio's per-destination answers, drawn at random for every request."""

    def __init__(self, faults: Faults):
        super().__init__()
        self.faults = faults

    def get(self, destination, default=None):
        f = self.faults
        destination = destination.removeprefix(WHATSAPP)  # a number refused for good is refused on every channel
        if destination.startswith(REFUSED_PREFIX):
            f.count("sms_attack_refused_21606")
            return REFUSED_21606
        if destination.startswith(FILTERED_PREFIX):
            return default  # taken: its carrier filters it (the report says so later)
        if f.permanent(destination):
            f.count("sms_permanent")
            return FakeTwilio.error(400, 21211, "The 'To' number is not a valid phone number.")
        kind = f.draw("sms")
        if kind == "timeout":
            return Answer(delay=f.answer_delay)
        if kind == "reset_after":
            return Answer(reset=True)
        if kind == "reset_before":
            return Answer(reset=True, deliver=False)
        if kind == "throttle":
            return FakeTwilio.error(429, 20429, "Too Many Requests", headers={"Retry-After": "1"})
        if kind == "server_error":
            sent = f.coin()
            if sent:
                f.count("sms_server_error_but_sent")
            return FakeTwilio.error(503, 20500, "Service unavailable", deliver=sent)
        return default


class ChaosTwilio(FakeTwilio):
    def __init__(self, faults: Faults):
        super().__init__()
        self.faults = faults
        self.by_destination = _Chaotic(faults)
        self.httpd.handle_error = lambda request, client_address: None  # type: ignore[method-assign]  # a killed worker's reset is expected

    def parse(self, raw: bytes):
        destination, body, fields = super().parse(raw)
        fields["_received_at"] = time.time()
        return destination, body, fields

    def collect(self) -> None:
        """Move what this server took into the shared delivery list."""
        for d in self.deliveries:
            if "Twiml" in d.request:  # a call: the code it spoke
                channel, spoken = "voice", _SPOKEN_CODE.search(d.body)
                secret = spoken.group(1).replace(", ", "") if spoken else None
            else:
                channel = "whatsapp" if d.destination.startswith(WHATSAPP) else "sms"
                match = _SMS_CODE.search(d.body)
                secret = match.group(1) if match else None
            destination = d.destination.removeprefix(WHATSAPP)
            self.faults.record(Delivered(channel, destination, secret, d.request["_received_at"]))
        self.deliveries = []


class _ChaosSmtpHandler(_Handler):
    def __init__(self, server: ChaosSmtp):
        super().__init__(server)
        self.faults = server.faults

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address.endswith("@" + ECHO_DOMAIN):
            self.faults.count("email_attack_relay_echo")
            return RELAY_ECHO.format(to=address)
        if self.faults.permanent(address):
            self.faults.count("email_permanent")
            return "550 5.1.1 No such user"
        kind = self.faults.draw("email")
        if kind == "reset_before":
            server.transport.abort()
            return "421 4.4.2 connection dropped"
        session.chaos = kind  # decided once per message, acted on at the end of data
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        kind = getattr(session, "chaos", None)
        session.chaos = None
        if kind == "throttle":
            return "421 4.7.0 Too many messages, try again later"
        if kind == "server_error":
            return "451 4.3.0 Temporary local problem"
        if kind == "echo_url":  # a content filter quoting the live link: it must never be stored
            found = re.search(r"https?://\S+", _email_text(envelope))
            return f"451 4.7.1 URL deferred by policy: {found.group() if found else '-'}"
        self.faults.record(_email_delivery(envelope))
        if kind == "reset_after":
            server.transport.abort()
            return "250 never seen"
        if kind == "timeout":
            await asyncio.sleep(self.faults.answer_delay)
        return "250 2.0.0 Ok: queued"


def _email_text(envelope) -> str:
    message = email.message_from_bytes(bytes(envelope.content), policy=email.policy.default)
    return "".join(part.get_content() for part in message.walk() if part.get_content_type() == "text/plain")


def _email_delivery(envelope) -> Delivered:
    text = _email_text(envelope)
    match = _LINK_TOKEN.search(text)
    return Delivered("email", envelope.rcpt_tos[0], match.group(1) if match else None, time.time())


class ChaosSmtp(FakeSmtpServer):
    def __init__(self, faults: Faults):
        super().__init__(idle_timeout=30)
        self.faults = faults
        self.controller.handler = _ChaosSmtpHandler(self)
