"""Email over SMTP (stdlib smtplib): plain, STARTTLS or implicit TLS, optional AUTH.

The transaction is driven step by step so the outcome knows how far it got: any failure before
the end-of-data marker left our side means nothing was sent (retryable); a timeout or reset
while waiting for the reply to the end of data is ambiguous (the server may have queued it).
Connections are pooled and reused across sends (one per concurrent sender at most); a reused
connection the server dropped while idle is replaced once, transparently, before MAIL FROM.
A 5yz refusal is classified by delivery/classification/smtp.py (the recipient's, ours, or
nobody's we can name); a session that fails ends with QUIT, as every other does.
"""

from __future__ import annotations

import re
import smtplib
import ssl
import threading
import time

from ...platform.redaction import scrub
from ..classification import Category, Fault, Verdict, ours
from ..classification import smtp as table
from ..config import SmtpConfig
from ..messages import EmailContent
from .base import SendResult, forget

_ENHANCED = re.compile(rb"^\s*([245])\.(\d{1,3})\.(\d{1,3})\b")
_DOT_LINE = re.compile(rb"(?m)^\.")
# The queue id in a 250 after the end of data: Postfix 'queued as 4069127A943', Exim 'id=1rAbCd-0001Xy-2Z'.
_QUEUE_ID = re.compile(rb"(?:queued as|\bid=)\s*([0-9A-Za-z][0-9A-Za-z._-]{2,63})", re.IGNORECASE)


class _Failed(Exception):
    """Carries a SendResult out of a transaction step."""

    def __init__(self, result: SendResult):
        self.result = result


def classify_reply(stage: str, code: int, text: bytes | str, recipient: str | None = None) -> SendResult:
    """An SMTP reply that is not the success expected at `stage`
    (connect = the greeting | ehlo | helo | auth | mail | rcpt | data | end); `recipient`: the
    address RCPT named, so a reply that echoes it is told apart (classification/smtp.py)."""
    if isinstance(text, str):  # smtplib's exceptions carry either
        text = text.encode("utf-8", "replace")
    match = _ENHANCED.match(text or b"")
    enhanced = ".".join(g.decode() for g in match.groups()) if match else ""
    detail = f"smtp {code}{' ' + enhanced if enhanced else ''} at {stage}: {scrub(text, 160)}"
    if code == 421 or 400 <= code < 500:
        return SendResult.retryable("smtp_transient", detail)
    if 500 <= code < 600:
        return SendResult.refused(table.reply_verdict(stage, code, enhanced, text, recipient), detail)
    if stage == "auth":  # neither success nor a refusal to our login
        return SendResult.configuration(detail, table.PROVIDER)
    return (
        SendResult.ambiguous("smtp_unexpected", detail)
        if stage == "end"
        else SendResult.retryable("smtp_unexpected", detail)
    )


class SmtpChannel:
    channel = "email"
    transport = "smtp"

    def __init__(self, config: SmtpConfig):
        self.config = config
        self._idle: list[smtplib.SMTP] = []
        self._lock = threading.Lock()

    # -- connections ------------------------------------------------------------------------------
    def _timeout(self, deadline: float) -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _Failed(SendResult.retryable("deadline", "no time left before the send started"))
        return min(self.config.timeout, left)

    def _context(self) -> ssl.SSLContext:
        return self.config.ssl_context or ssl.create_default_context()

    def _connect(self, deadline: float) -> smtplib.SMTP:
        cfg = self.config
        timeout = self._timeout(deadline)
        conn: smtplib.SMTP | None = None
        try:
            if cfg.security == "tls":
                conn = smtplib.SMTP_SSL(
                    cfg.host, cfg.port, local_hostname=cfg.helo_name, timeout=timeout, context=self._context()
                )
            else:
                conn = smtplib.SMTP(cfg.host, cfg.port, local_hostname=cfg.helo_name, timeout=timeout)
            self._hello(conn)
            if cfg.security == "starttls":
                if not conn.has_extn("starttls"):
                    raise _Failed(
                        SendResult.configuration(
                            "SMTP_SECURITY=starttls but the server does not offer STARTTLS", table.PROVIDER
                        )
                    )
                conn.starttls(context=self._context())
                self._hello(conn)
            if cfg.username:
                self._login(conn)
            return conn
        except _Failed:
            self._quit(conn)  # the server answered: end the session politely
            raise
        except ssl.SSLCertVerificationError as exc:
            self._discard(conn)
            raise _Failed(
                SendResult.configuration(f"TLS certificate not trusted: {scrub(exc.verify_message)}", table.PROVIDER)
            ) from None
        except smtplib.SMTPConnectError as exc:
            self._discard(conn)
            raise _Failed(classify_reply("connect", exc.smtp_code, exc.smtp_error)) from None
        except smtplib.SMTPResponseException as exc:
            self._quit(conn)
            raise _Failed(classify_reply("connect", exc.smtp_code, exc.smtp_error)) from None
        except (OSError, smtplib.SMTPException) as exc:  # refused, unreachable, timeout, TLS failure
            self._discard(conn)
            raise _Failed(
                SendResult.retryable("connect", f"cannot reach the SMTP server: {type(exc).__name__}")
            ) from None

    @staticmethod
    def _hello(conn: smtplib.SMTP) -> None:
        """EHLO, checked: smtplib ignores a refused EHLO, and the server's reason was then lost behind
        its later '503 send HELO/EHLO first'. HELO only where EHLO is not understood (RFC 5321 4.1.4)."""
        code, text = conn.ehlo()
        if code == 250:
            return
        if code in (500, 502):
            code, text = conn.helo()
            if code == 250:
                return
            raise _Failed(classify_reply("helo", code, text))
        raise _Failed(classify_reply("ehlo", code, text))

    def _login(self, conn: smtplib.SMTP) -> None:
        # One mechanism, PLAIN or LOGIN (over TLS in production): smtplib's login() would try several
        # in turn and report whatever the last one raised rather than the server's 535.
        offered = conn.esmtp_features.get("auth", "").upper().split()
        mechanism = next((m for m in ("PLAIN", "LOGIN") if m in offered), None)
        if mechanism is None:
            raise _Failed(
                SendResult.configuration(
                    "SMTP_USERNAME is set but the server offers no AUTH PLAIN/LOGIN (STARTTLS first? see SMTP_SECURITY)",
                    table.PROVIDER,
                )
            )
        conn.user, conn.password = self.config.username or "", self.config.password or ""
        try:
            code, text = conn.auth(mechanism, getattr(conn, f"auth_{mechanism.lower()}"), initial_response_ok=True)
        except smtplib.SMTPAuthenticationError as exc:
            raise _Failed(classify_reply("auth", exc.smtp_code, exc.smtp_error)) from None
        finally:
            conn.password = ""  # clearing it; smtplib keeps it on the object otherwise  # nosec B105
        if code not in (235, 503):
            raise _Failed(classify_reply("auth", code, text))

    def _acquire(self, deadline: float) -> tuple[smtplib.SMTP, bool]:
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        return self._connect(deadline), False

    def _release(self, conn: smtplib.SMTP) -> None:
        with self._lock:
            self._idle.append(conn)

    @classmethod
    def _quit(cls, conn: smtplib.SMTP | None) -> None:
        """QUIT, then close: a session that failed on our side (configuration) still ends properly."""
        if conn is None:
            return
        try:
            if conn.sock is not None:
                conn.quit()
        except (OSError, smtplib.SMTPException):
            pass
        cls._discard(conn)

    @staticmethod
    def _discard(conn: smtplib.SMTP | None) -> None:
        if conn is None:
            return
        try:
            conn.close()
        except OSError:
            pass

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            try:
                conn.quit()
            except (OSError, smtplib.SMTPException):
                self._discard(conn)

    # -- one message --------------------------------------------------------------------------------
    def send(self, message: EmailContent, deadline: float) -> SendResult:
        return forget(self._send(message, deadline), message.secret)  # the rendered secret, by value

    def _send(self, message: EmailContent, deadline: float) -> SendResult:
        try:
            payload = message.mime()
        except ValueError:
            return SendResult.refused(_UNWRITABLE, "the address cannot be written into a message header")
        try:
            conn, reused = self._acquire(deadline)
            try:
                return self._transaction(conn, message, payload, deadline)
            except _StaleConnection:
                if not reused:
                    return SendResult.retryable(
                        "connection_lost", "the SMTP server closed the connection before MAIL FROM"
                    )
                conn = self._connect(deadline)  # an idle pooled connection had died: once, on a fresh one
                return self._transaction(conn, message, payload, deadline)
        except _Failed as failed:
            return failed.result

    def _step(self, conn: smtplib.SMTP, deadline: float) -> None:
        if conn.sock is not None:
            conn.sock.settimeout(self._timeout(deadline))

    def _transaction(self, conn: smtplib.SMTP, message: EmailContent, payload: bytes, deadline: float) -> SendResult:
        """MAIL, RCPT, DATA and the message. Every return path leaves `conn` pooled or closed."""
        needs_utf8 = not (message.to.isascii() and message.sender_address.isascii())
        if needs_utf8 and not conn.has_extn("smtputf8"):
            self._release(conn)
            return SendResult.refused(_NO_SMTPUTF8, "non-ASCII address and the server lacks SMTPUTF8")
        try:
            self._step(conn, deadline)
            try:
                code, text = conn.mail(message.sender_address, ["SMTPUTF8", "BODY=8BITMIME"] if needs_utf8 else [])
            except smtplib.SMTPServerDisconnected:
                raise _StaleConnection() from None
            if code == 421:
                raise _StaleConnection()
            if code != 250:
                return self._rset(conn, deadline, classify_reply("mail", code, text))
            self._step(conn, deadline)
            code, text = conn.rcpt(message.to)
            if code not in (250, 251):
                return self._rset(conn, deadline, classify_reply("rcpt", code, text, message.to))
            self._step(conn, deadline)
            code, text = conn.docmd("data")
            if code != 354:
                return self._rset(conn, deadline, classify_reply("data", code, text, message.to))
            self._step(conn, deadline)
            stuffed = _DOT_LINE.sub(b"..", payload)
            conn.send(stuffed + (b".\r\n" if stuffed.endswith(b"\r\n") else b"\r\n.\r\n"))
        except (_StaleConnection, _Failed):
            self._discard(conn)
            raise
        except (OSError, smtplib.SMTPException) as exc:
            # conn.send raises before the end-of-data marker left us: the server cannot have accepted.
            self._discard(conn)
            return SendResult.retryable(
                "connection_lost", f"SMTP connection failed before the end of data: {type(exc).__name__}"
            )
        return self._finish(conn, deadline, message.to)

    def _finish(self, conn: smtplib.SMTP, deadline: float, recipient: str) -> SendResult:
        """Waiting for the reply to the end of data: the one moment a failure is ambiguous."""
        try:
            if conn.sock is None:  # the server hung up after the data was sent: nothing to wait for
                raise smtplib.SMTPServerDisconnected("connection closed before the end-of-data reply")
            conn.sock.settimeout(max(0.05, min(self.config.timeout, deadline - time.monotonic())))
            code, text = conn.getreply()
        except (OSError, smtplib.SMTPException) as exc:
            self._discard(conn)
            return SendResult.ambiguous(
                "no_reply_after_data", f"no reply after the message was sent: {type(exc).__name__}"
            )
        if code == 250:
            self._release(conn)
            return SendResult.accepted(provider_reference(text))
        self._discard(conn) if code == 421 else self._release(conn)
        return classify_reply("end", code, text, recipient)

    def _rset(self, conn: smtplib.SMTP, deadline: float, result: SendResult) -> SendResult:
        """After a refused transaction: RSET and pool the connection if it is still healthy."""
        try:
            self._step(conn, deadline)
            if conn.rset()[0] == 250:
                self._release(conn)
                return result
        except (OSError, smtplib.SMTPException, _Failed):
            pass
        self._discard(conn)
        return result


def provider_reference(text: bytes) -> str | None:
    """The server's queue id from its 250 reply, else the reply with addresses masked (a queue id is
    a digit-and-letter run, never a destination: digit runs stay)."""
    match = _QUEUE_ID.search(text or b"")
    if match:
        return match.group(1).decode("ascii")
    return scrub(text, 120, numbers=False) or None


# The address itself cannot go into a header (CR, LF): the recipient's; our relay lacking SMTPUTF8
# for a valid international address: ours.
_UNWRITABLE = Verdict(True, Fault.RECIPIENT, Category.INVALID_DESTINATION, table.PROVIDER)
_NO_SMTPUTF8 = ours(Category.MESSAGE_REJECTED, table.PROVIDER)


class _StaleConnection(Exception):
    """A pooled connection turned out dead before anything of this message was sent."""
