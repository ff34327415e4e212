"""The one message shape we send, multipart/alternative (text + HTML), built by the standard
library's `email.mime` classes: CRLF line breaks everywhere (RFC 5322/2045; text is in canonical
CRLF form inside base64 parts too), a `+0000` Date, ASCII headers folded rather than encoded,
RFC 2047 only for non-ASCII text, a raw UTF-8 To only when the address needs SMTPUTF8. About
0.3-1 ms per message (EmailMessage took 1-5 ms here), invisible behind a provider call; a
hand-written builder saved that and got the line breaks wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from email import policy
from email.header import Header
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from email.utils import format_datetime, formataddr, parseaddr

MAX_7BIT_LINE = 998  # RFC 5322 hard limit, CRLF excluded
_POLICY = policy.compat32.clone(linesep="\r\n")
_POLICY_UTF8 = _POLICY.clone(cte_type="8bit")  # raw (surrogate-escaped) UTF-8 header bytes pass through


class HeaderInjection(ValueError):
    """A header value would contain a line break (never from our validated data, but refuse it)."""


def _check(value: str) -> str:
    if "\r" in value or "\n" in value:
        raise HeaderInjection("line break in a header value")
    return value


def encode_mailbox(mailbox: str) -> str:
    """'Name <addr>' with a non-ASCII display name encoded; the address itself is left alone."""
    _check(mailbox)
    name, address = parseaddr(mailbox)
    if not address:
        raise ValueError("not a mailbox")
    return formataddr((name, address), "utf-8") if name else address


def _part(content: str, subtype: str) -> MIMEText:
    """7bit when it is safe, base64 of the CRLF text otherwise (never 8bit: not every relay takes it)."""
    crlf = "\r\n".join(content.replace("\r\n", "\n").split("\n"))
    if content.isascii() and all(len(line) <= MAX_7BIT_LINE for line in content.splitlines()):
        return MIMEText(crlf, subtype, "us-ascii")
    return MIMEText(crlf, subtype, "utf-8")  # utf-8: base64


def build(
    *,
    sender: str,
    to: str,
    subject: str,
    message_id: str,
    text: str,
    html: str,
    extra_headers: Sequence[tuple[str, str]] = (),
    date: str | None = None,
) -> bytes:
    """The message as CRLF bytes ready for SMTP DATA (before dot-stuffing)."""
    message = MIMEMultipart("alternative", policy=_POLICY)
    message["From"] = encode_mailbox(sender)
    # A non-ASCII address only goes out over SMTPUTF8 (smtp.py checks): written as raw UTF-8.
    message["To"] = _check(to) if to.isascii() else to.encode("utf-8").decode("ascii", "surrogateescape")
    subject_header: str | Header = (
        _check(subject) if subject.isascii() else Header(_check(subject), "utf-8", header_name="Subject")
    )
    message["Subject"] = subject_header  # type: ignore[assignment]  # email.message accepts a Header
    message["Date"] = date or format_datetime(datetime.now(UTC))  # '+0000', not the obsolete 'GMT'
    message["Message-ID"] = _check(message_id)
    for name, value in extra_headers:
        message[name] = _check(value)
    message.attach(_part(text, "plain"))
    message.attach(_part(html, "html"))
    return message.as_bytes(policy=_POLICY if to.isascii() else _POLICY_UTF8)
