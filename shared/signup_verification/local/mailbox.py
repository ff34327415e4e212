"""The local mailbox of `verifyctl dev`: where email and SMS go on a laptop.

- an SMTP server (aiosmtpd) that keeps every message it is handed (the store: mailstore.py);
- a fake Twilio Messages API that keeps every SMS (fake_twilio.py);
- the sandbox's test destinations (sandbox.py): addresses and numbers that bounce, are reported as
  spam or undelivered, answer 500 or answer slowly, always the same way;
- a web page listing what arrived (newest first) and showing each message, links clickable, its
  delivery state, and `/api/messages` for scripts and tests;
- with a Reporter (provider_reports.py): the reports SendGrid and Twilio would post about them,
  signed, to the local `delivery_reports` target; "Bounce this" and "Report now" on each message.

Messages live in memory only: a restart empties the mailbox, as a fresh laptop run should.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import flask
from werkzeug.serving import WSGIRequestHandler

from . import fake_twilio, sandbox
from .mailstore import MAX_MESSAGES, Mailbox, Message, linkify, sms_segments
from .ports import PortInUse, in_use, wsgi_server
from .provider_reports import Reporter

__all__ = ["MAX_MESSAGES", "Mailbox", "MailboxServer", "Message", "create_app", "linkify", "sms_segments"]


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
    reporter: Reporter | None = None,
) -> flask.Flask:
    app = flask.Flask(__name__, template_folder=str(Path(__file__).resolve().parent / "templates"))
    fake_twilio.register(
        app, mailbox, twilio_account_sid, twilio_auth_token, reporter.sms_accepted if reporter else None
    )

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
            can_report=reporter is not None and message.delivery is not None,
            can_bounce=reporter is not None and reporter.sends_email_reports and message.kind == "email",
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

    # -- what the emulated providers report (provider_reports.py) --------------------------------
    @app.post("/messages/<int:message_id>/bounce")
    def bounce(message_id: int) -> flask.typing.ResponseReturnValue:
        message = mailbox.get(message_id) or flask.abort(404)
        if reporter is None or message.kind != "email":
            flask.abort(404)
        reporter.bounce(message)
        return flask.redirect(f"/messages/{message_id}", 303)

    @app.post("/messages/<int:message_id>/report")
    def report_now(message_id: int) -> flask.typing.ResponseReturnValue:
        mailbox.get(message_id) or flask.abort(404)
        if reporter is None:
            flask.abort(404)
        reporter.report_now(message_id)
        return flask.redirect(f"/messages/{message_id}", 303)

    @app.get("/api/messages")
    def api_messages() -> flask.Response:
        return flask.jsonify([m.to_json() for m in mailbox.messages()])

    @app.delete("/api/messages")
    def api_clear() -> tuple[str, int]:
        mailbox.clear()
        return "", 204

    return app


# -- servers ------------------------------------------------------------------------------------
class _SmtpHandler:
    def __init__(self, mailbox: Mailbox, reporter: Reporter | None) -> None:
        self.mailbox, self.reporter = mailbox, reporter

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if any(sandbox.email_behaviour(r) == "slow" for r in envelope.rcpt_tos):
            await asyncio.sleep(sandbox.SLOW_SECONDS)  # a slow provider (the sandbox's `slow@…`)
        message = self.mailbox.add_email(
            envelope.original_content or envelope.content, envelope.mail_from, envelope.rcpt_tos
        )
        if self.reporter is not None:
            self.reporter.email_received(message)
        return f"250 2.0.0 Ok: queued as {message.sid}"  # as Postfix answers: the queue id is the provider ref


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:  # the page polls: no line per request
        pass


class MailboxServer:
    """SMTP on `smtp_port` and the web page + fake Twilio on `web_port`, each in a thread of this process.
    `reports`: the Reporter's settings (provider_reports.py); without them nothing is reported."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        smtp_port: int = 8025,
        web_port: int = 8090,
        reports: dict[str, Any] | None = None,
        **app_options: Any,
    ):
        self.host, self.smtp_port, self.web_port = host, smtp_port, web_port
        self.mailbox = Mailbox()
        twilio = {k: app_options.get(k) for k in ("twilio_account_sid", "twilio_auth_token")}
        self.reporter = Reporter(self.mailbox, **{**twilio, **reports}) if reports is not None else None
        self._app_options = {**app_options, "reporter": self.reporter}
        self._smtp: Any = None
        self._web: Any = None
        self._web_thread: threading.Thread | None = None

    @property
    def web_url(self) -> str:
        return f"http://{self.host}:{self.web_port}"

    def start(self) -> MailboxServer:
        from aiosmtpd.controller import Controller  # the `local` extra; production never imports this

        self._smtp = Controller(
            _SmtpHandler(self.mailbox, self.reporter),
            hostname=self.host,
            port=self.smtp_port,
            data_size_limit=10 * 1024 * 1024,
        )
        try:
            self._smtp.start()
        except OSError as exc:  # aiosmtpd binds in start(): a port taken since `verifyctl dev` checked it
            if in_use(exc):
                raise PortInUse(self.smtp_port, "mailbox SMTP") from None
            raise
        try:
            self._web = wsgi_server(
                self.host,
                self.web_port,
                create_app(self.mailbox, **self._app_options),
                "mailbox web",
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
        if self.reporter is not None:
            self.reporter.start()
        return self

    def stop(self) -> None:
        if self.reporter is not None:
            self.reporter.stop()
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
