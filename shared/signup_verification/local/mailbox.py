"""The local mailbox of `verifyctl dev`: where email and SMS go on a laptop.

- an SMTP server (aiosmtpd) that keeps every message it is handed;
- a fake Twilio Messages API (`POST /2010-04-01/Accounts/{sid}/Messages.json`, form fields To, From,
  Body; 201 with a JSON message resource) that keeps every SMS, with Twilio's documented test
  numbers answering their documented errors (+15005550001 invalid number, ... see _MAGIC_NUMBERS);
- a web page listing what arrived (newest first) and showing each message, links clickable, and
  `/api/messages` for scripts and tests.

Messages live in memory only: a restart empties the mailbox, as a fresh laptop run should.
"""

from __future__ import annotations

import email
import email.policy
import html.parser
import itertools
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import flask
import markupsafe
from werkzeug.serving import WSGIRequestHandler, make_server

from ..delivery import sms

MAX_MESSAGES = 1000
_URL = re.compile(r"https?://[^\s<>\"')]+")
_E164 = re.compile(r"^\+[1-9]\d{6,14}$")
# Twilio's test credentials answer these `To` numbers with these errors (twilio.com/docs/iam/test-credentials).
_MAGIC_NUMBERS = {
    "+15005550001": (21211, "The 'To' number +15005550001 is not a valid phone number."),
    "+15005550002": (21612, "The 'To' phone number is not currently reachable via SMS."),
    "+15005550003": (
        21408,
        "Permission to send an SMS has not been enabled for the region indicated by the 'To' number.",
    ),
    "+15005550004": (21610, "Attempt to send to unsubscribed recipient"),
    "+15005550009": (21614, "'To' number is not a valid mobile number"),
}


@dataclass
class Message:
    id: int
    kind: str  # email | sms
    received_at: datetime
    sender: str
    recipients: list[str]
    subject: str
    text: str
    html: str | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)
    raw: bytes | None = None
    sid: str | None = None  # the fake Twilio message sid, or the SMTP queue id (the provider reference)

    @property
    def links(self) -> list[str]:
        found = _URL.findall(self.text)
        if self.html:
            found += _hrefs(self.html)
        return list(dict.fromkeys(u for u in found if u.startswith(("http://", "https://"))))

    @property
    def preview(self) -> str:
        return self.subject if self.kind == "email" else self.text

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "received_at": self.received_at.isoformat(),
            "from": self.sender,
            "to": self.recipients,
            "subject": self.subject,
            "text": self.text,
            "html": self.html,
            "links": self.links,
            "sid": self.sid,
        }


class Mailbox:
    """Thread-safe store shared by the SMTP handler, the Twilio endpoint and the web page."""

    def __init__(self) -> None:
        self._messages: list[Message] = []
        self._ids = itertools.count(1)
        self._changed = threading.Condition()

    def _add(self, build: Callable[[int], Message]) -> Message:
        with self._changed:
            message = build(next(self._ids))
            self._messages.append(message)
            del self._messages[:-MAX_MESSAGES]
            self._changed.notify_all()
        return message

    def add_email(self, raw: bytes, mail_from: str, rcpt_tos: list[str]) -> Message:
        parsed = email.message_from_bytes(raw, policy=email.policy.default)
        text_part = parsed.get_body(preferencelist=("plain",))
        html_part = parsed.get_body(preferencelist=("html",))
        return self._add(
            lambda i: Message(
                i,
                "email",
                datetime.now(UTC),
                str(parsed.get("From") or mail_from),
                list(rcpt_tos),
                str(parsed.get("Subject") or "(no subject)"),
                text_part.get_content() if text_part is not None else "",
                html_part.get_content() if html_part is not None else None,
                [(k, str(v)) for k, v in parsed.items()],
                raw,
                sid=secrets.token_hex(5).upper(),
            )
        )

    def add_sms(self, to: str, sender: str, body: str) -> Message:
        sid = "SM" + secrets.token_hex(16)
        return self._add(lambda i: Message(i, "sms", datetime.now(UTC), sender, [to], "", body, sid=sid))

    def messages(self) -> list[Message]:
        with self._changed:
            return list(reversed(self._messages))

    def get(self, message_id: int) -> Message | None:
        with self._changed:
            return next((m for m in self._messages if m.id == message_id), None)

    def clear(self) -> None:
        with self._changed:
            self._messages.clear()

    def wait_for(self, predicate: Callable[[Message], bool], timeout: float) -> Message | None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                match = next((m for m in reversed(self._messages) if predicate(m)), None)
                remaining = deadline - time.monotonic()
                if match is not None or remaining <= 0:
                    return match
                self._changed.wait(remaining)


class _Hrefs(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.found += [v for k, v in attrs if k == "href" and v]


def _hrefs(document: str) -> list[str]:
    parser = _Hrefs()
    parser.feed(document)
    return parser.found


def linkify(text: str) -> markupsafe.Markup:
    """Plain text, escaped, with its http(s) URLs as links."""
    out, last = [], 0
    for match in _URL.finditer(text):
        out.append(markupsafe.escape(text[last : match.start()]))
        url = markupsafe.escape(match.group(0))
        out.append(markupsafe.Markup(f'<a href="{url}">{url}</a>'))  # url is escaped above  # nosec B704
        last = match.end()
    out.append(markupsafe.escape(text[last:]))
    return markupsafe.Markup("").join(out)


def sms_segments(body: str) -> int:
    """Segments as carriers and Twilio count them: the dispatcher's own count (sms.py), never a second one."""
    return sms.encode_info(body).segments


# -- the web app --------------------------------------------------------------------------------
_PAGE_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
# The email's own HTML, framed by the message page: no scripts, no remote loads, links open on top.
_EMAIL_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'self'"


def create_app(
    mailbox: Mailbox,
    *,
    twilio_account_sid: str | None = None,
    twilio_auth_token: str | None = None,
    on_run_now: Callable[[], None] | None = None,
    refresh_seconds: int = 5,
) -> flask.Flask:
    app = flask.Flask(__name__, template_folder=str(Path(__file__).resolve().parent / "templates"))

    @app.after_request
    def _headers(response: flask.Response) -> flask.Response:
        response.headers.setdefault("Content-Security-Policy", _PAGE_CSP)
        response.headers["Cache-Control"] = "no-store"
        response.headers["Referrer-Policy"] = "no-referrer"
        return response

    @app.get("/")
    def index() -> str:
        return flask.render_template(
            "mailbox.html",
            messages=mailbox.messages(),
            refresh=refresh_seconds,
            can_run=on_run_now is not None,
            notice=flask.request.args.get("notice"),
        )

    @app.get("/messages/<int:message_id>")
    def show(message_id: int) -> str:
        message = mailbox.get(message_id) or flask.abort(404)
        return flask.render_template(
            "message.html",
            m=message,
            body=linkify(message.text),
            segments=sms_segments(message.text) if message.kind == "sms" else None,
        )

    @app.get("/messages/<int:message_id>/html")
    def show_html(message_id: int) -> flask.Response:
        message = mailbox.get(message_id) or flask.abort(404)
        if not message.html:
            flask.abort(404)
        # <base target="_top">: a link clicked inside the frame opens in the window, as in a mail client.
        document = re.sub(r"(?i)<head[^>]*>", lambda m: m.group(0) + '<base target="_top">', message.html, count=1)
        return flask.Response(document, mimetype="text/html", headers={"Content-Security-Policy": _EMAIL_CSP})

    @app.get("/messages/<int:message_id>/raw")
    def show_raw(message_id: int) -> flask.Response:
        message = mailbox.get(message_id) or flask.abort(404)
        raw = message.raw if message.raw is not None else message.text.encode()
        return flask.Response(raw, mimetype="text/plain")

    @app.post("/clear")
    def clear() -> flask.typing.ResponseReturnValue:
        mailbox.clear()
        return flask.redirect("/", 303)

    @app.post("/scheduler/run")
    def run_now() -> flask.typing.ResponseReturnValue:
        if on_run_now is None:
            flask.abort(404)
        on_run_now()
        return flask.redirect("/?notice=dispatch+and+reconcile+triggered", 303)

    @app.get("/api/messages")
    def api_messages() -> flask.Response:
        return flask.jsonify([m.to_json() for m in mailbox.messages()])

    @app.delete("/api/messages")
    def api_clear() -> tuple[str, int]:
        mailbox.clear()
        return "", 204

    # -- fake Twilio ----------------------------------------------------------------------------
    def twilio_error(status: int, code: int, message: str) -> tuple[flask.Response, int]:
        return flask.jsonify(
            {
                "code": code,
                "message": message,
                "status": status,
                "more_info": f"https://www.twilio.com/docs/errors/{code}",
            }
        ), status

    def authorised(account_sid: str) -> bool:
        auth = flask.request.authorization
        if twilio_account_sid is None:
            return True
        return (
            auth is not None
            and auth.username == twilio_account_sid == account_sid
            and auth.password == twilio_auth_token
        )

    @app.post("/2010-04-01/Accounts/<account_sid>/Messages.json")
    def twilio_create(account_sid: str):
        if not authorised(account_sid):
            return twilio_error(401, 20003, "Authenticate")
        form = flask.request.form
        to, sender, body = (
            form.get("To", ""),
            form.get("From") or form.get("MessagingServiceSid", ""),
            form.get("Body", ""),
        )
        if not to:
            return twilio_error(400, 21604, "A 'To' phone number is required.")
        if not sender:
            return twilio_error(400, 21603, "A 'From' phone number is required.")
        if not body:
            return twilio_error(400, 21602, "Message body is required.")
        if len(body) > 1600:
            return twilio_error(400, 21617, "The concatenated message body exceeds the 1600 character limit.")
        if to in _MAGIC_NUMBERS:
            return twilio_error(400, *_MAGIC_NUMBERS[to])
        if not _E164.match(to):
            return twilio_error(400, 21211, f"The 'To' number {to} is not a valid phone number.")
        message = mailbox.add_sms(to, sender, body)
        return flask.jsonify(_twilio_resource(message, account_sid)), 201

    @app.get("/2010-04-01/Accounts/<account_sid>/Messages/<sid>.json")
    def twilio_fetch(account_sid: str, sid: str):
        if not authorised(account_sid):
            return twilio_error(401, 20003, "Authenticate")
        message = next((m for m in mailbox.messages() if m.sid == sid), None)
        if message is None:
            return twilio_error(404, 20404, f"The requested resource {flask.request.path} was not found")
        return flask.jsonify(_twilio_resource(message, account_sid))

    return app


def _twilio_resource(message: Message, account_sid: str) -> dict[str, Any]:
    created = format_datetime(message.received_at, usegmt=True)
    return {
        "sid": message.sid,
        "account_sid": account_sid,
        "api_version": "2010-04-01",
        "to": message.recipients[0],
        "from": message.sender,
        "body": message.text,
        "status": "queued",
        "direction": "outbound-api",
        "num_segments": str(sms_segments(message.text)),
        "num_media": "0",
        "price": None,
        "price_unit": "USD",
        "error_code": None,
        "error_message": None,
        "date_created": created,
        "date_updated": created,
        "date_sent": None,
        "messaging_service_sid": None,
        "uri": f"/2010-04-01/Accounts/{account_sid}/Messages/{message.sid}.json",
    }


# -- servers ------------------------------------------------------------------------------------
class _SmtpHandler:
    def __init__(self, mailbox: Mailbox) -> None:
        self.mailbox = mailbox

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = self.mailbox.add_email(
            envelope.original_content or envelope.content, envelope.mail_from, envelope.rcpt_tos
        )
        return f"250 2.0.0 Ok: queued as {message.sid}"  # as Postfix answers: the queue id is the provider ref


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:  # the page polls: no line per request
        pass


class MailboxServer:
    """SMTP on `smtp_port` and the web page + fake Twilio on `web_port`, each in a thread of this process."""

    def __init__(self, host: str = "127.0.0.1", smtp_port: int = 8025, web_port: int = 8090, **app_options: Any):
        self.host, self.smtp_port, self.web_port = host, smtp_port, web_port
        self.mailbox = Mailbox()
        self._app_options = app_options
        self._smtp: Any = None
        self._web: Any = None
        self._web_thread: threading.Thread | None = None

    @property
    def web_url(self) -> str:
        return f"http://{self.host}:{self.web_port}"

    def start(self) -> MailboxServer:
        from aiosmtpd.controller import Controller  # the `local` extra; production never imports this

        self._smtp = Controller(
            _SmtpHandler(self.mailbox), hostname=self.host, port=self.smtp_port, data_size_limit=10 * 1024 * 1024
        )
        self._smtp.start()
        try:
            self._web = make_server(
                self.host,
                self.web_port,
                create_app(self.mailbox, **self._app_options),
                threaded=True,
                request_handler=_QuietHandler,
            )
        except BaseException:
            self._smtp.stop()
            raise
        self._web_thread = threading.Thread(
            target=self._web.serve_forever, args=(0.1,), name="mailbox-web", daemon=True
        )
        self._web_thread.start()
        return self

    def stop(self) -> None:
        if self._web is not None:
            self._web.shutdown()
            self._web.server_close()
            self._web = None
        if self._smtp is not None:
            self._smtp.stop()
            self._smtp = None

    def __enter__(self) -> MailboxServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
