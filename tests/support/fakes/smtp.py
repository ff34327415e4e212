"""An SMTP server (aiosmtpd) that records every message it accepts, with scriptable misbehaviour:
a refusing greeting, an EHLO reply, per-recipient RCPT replies (Postfix's smtpd_delay_reject
reports sender, HELO and client refusals there), a DATA reply, a delay before the final reply
(client timeout after sending), dropping the connection after the message was taken (reset after
accepting), AUTH with fixed credentials, STARTTLS or implicit TLS. It counts QUITs received, and
answers the end of data as Postfix does (`250 2.0.0 Ok: queued as 4069127A001`)."""

from __future__ import annotations

import asyncio
import email
import email.policy
import re
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Received:
    mail_from: str
    rcpt_tos: list[str]
    data: bytes

    @property
    def message(self) -> email.message.EmailMessage:
        return email.message_from_bytes(self.data, policy=email.policy.default)


def _decoded_body(raw: bytes) -> bytes:
    """The message's text parts decoded (quoted-printable would split the URL across lines)."""
    import email
    from email import policy

    message = email.message_from_bytes(raw, policy=policy.default)
    return b" ".join(part.get_content().encode() for part in message.walk() if part.get_content_maintype() == "text")


@dataclass
class SmtpBehaviour:
    rcpt_reply: Callable[[str], str | None] = lambda address: None  # None: accept
    data_reply: str | None = None  # e.g. '451 4.3.0 try later'; None: 250
    reply_delay: float = 0.0  # seconds before the reply to the end of data
    drop_after_data: bool = False  # take the message, then close without a reply
    mail_reply: str | None = None
    greeting: str | None = None  # e.g. '554 5.7.1 no SMTP service for you'; None: 220
    ehlo_reply: str | None = None  # e.g. '504 5.5.2 <localhost>: Helo command rejected'; None: the features
    # A content filter that quotes the message's first URL in its rejection.
    echo_first_url: bool = False


class _Smtp(SMTP):
    """aiosmtpd's server with a scriptable greeting (the one reply it hard-codes)."""

    def __init__(self, fake: FakeSmtpServer, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._fake = fake
        self._greeted = False

    def connection_lost(self, error):
        super().connection_lost(error)
        self._fake._first_closed.set()  # the controller's start-up probe is done (and logged)

    async def push(self, status: str):  # type: ignore[override]  # aiosmtpd passes str replies
        if not self._greeted:
            self._greeted = True
            status = self._fake.behaviour.greeting or status
        await super().push(status)


class _Controller(Controller):
    def __init__(self, fake: FakeSmtpServer, *args, **kwargs):
        self._fake = fake
        super().__init__(*args, **kwargs)

    def factory(self):
        return _Smtp(self._fake, self.handler, **self.SMTP_kwargs)


class _Handler:
    def __init__(self, server: FakeSmtpServer):
        self.fake = server

    async def handle_EHLO(self, server, session, envelope, hostname, responses):
        if self.fake.behaviour.ehlo_reply:
            return [self.fake.behaviour.ehlo_reply]
        session.host_name = hostname
        return responses

    async def handle_QUIT(self, server, session, envelope):
        with self.fake._lock:
            self.fake.quits += 1
        return "221 2.0.0 Bye"

    async def handle_MAIL(self, server, session, envelope, address, mail_options):
        if self.fake.behaviour.mail_reply:
            return self.fake.behaviour.mail_reply
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 OK"

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        refused = self.fake.behaviour.rcpt_reply(address)
        if refused:
            return refused
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        behaviour = self.fake.behaviour
        if behaviour.data_reply:
            return behaviour.data_reply
        if behaviour.echo_first_url:
            found = re.search(rb"https?://[^\s\"'<>]+", _decoded_body(bytes(envelope.content)))
            if found:
                return f"554 5.7.1 URL blocked by policy: {found.group().decode()}"
        with self.fake._lock:
            self.fake.received.append(Received(envelope.mail_from, list(envelope.rcpt_tos), bytes(envelope.content)))
            queue_id = f"4069127A{len(self.fake.received):03d}"  # Postfix-like: a digit run that is not a number
        if behaviour.drop_after_data:
            server.transport.abort()
            return "250 never seen"
        if behaviour.reply_delay:
            await asyncio.sleep(behaviour.reply_delay)
        return f"250 2.0.0 Ok: queued as {queue_id}"


class FakeSmtpServer:
    def __init__(
        self,
        *,
        credentials: tuple[str, str] | None = None,
        starttls: ssl.SSLContext | None = None,
        implicit_tls: ssl.SSLContext | None = None,
        smtputf8: bool = True,
        idle_timeout: float = 300,
    ):
        self.port = free_port()
        self.host = "127.0.0.1"
        self.received: list[Received] = []
        self.behaviour = SmtpBehaviour()
        self.auth_failures = 0
        self.quits = 0
        self._first_closed = threading.Event()
        self._lock = threading.Lock()
        kwargs: dict = {"enable_SMTPUTF8": smtputf8, "timeout": idle_timeout}  # idle clients get 421 and are closed
        if credentials:
            kwargs.update(authenticator=self._authenticator(credentials), auth_require_tls=False)
        if starttls:
            kwargs.update(tls_context=starttls)
        self.controller = _Controller(
            self,
            _Handler(self),
            hostname=self.host,
            port=self.port,
            ssl_context=implicit_tls,
            ready_timeout=10,
            **kwargs,
        )

    def _authenticator(self, credentials: tuple[str, str]):
        def check(server, session, envelope, mechanism, auth_data):
            ok = (
                isinstance(auth_data, LoginPassword)
                and (auth_data.login.decode(), auth_data.password.decode()) == credentials
            )
            if not ok:
                self.auth_failures += 1
            return AuthResult(success=ok, handled=False)  # handled=False: the server answers 535 itself

        return check

    def start(self) -> FakeSmtpServer:
        self.controller.start()
        # The controller connects once to start the server; wait until that probe's session has ended,
        # so its 'EOF received' log line cannot land inside a test's log capture (seen under load).
        self._first_closed.wait(2.0)
        return self

    def stop(self) -> None:
        self.controller.stop()

    def __enter__(self) -> FakeSmtpServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def recipients(self) -> list[str]:
        with self._lock:
            return [r for message in self.received for r in message.rcpt_tos]
