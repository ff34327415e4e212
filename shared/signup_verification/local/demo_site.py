"""The demo signup site of `verifyctl dev`: what an application integrating the service does, with
the client library (clients/python) and nothing of the service's own code. It runs only while the
service's webhooks come to it (wiring.py): pointed at your own site, they never would.

- `GET /` a sign-up form; `POST /signup` creates a verification through the client, its `return_url`
  pointing back at the account's page here;
- `POST /webhooks` verifies each event's Standard Webhooks signature (the client's verify_webhook),
  deduplicates on `webhook-id`, and marks the account verified on `verification.verified`;
- `GET /accounts/<id>` shows the account: "verified" only once the webhook said so (the read API's
  answer is shown beside it, for comparison).

Accounts live in memory, like the mailbox's messages: a restart empties them.
"""

from __future__ import annotations

import itertools
import secrets
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import flask
import jinja2
from werkzeug.serving import WSGIRequestHandler

from ..platform.config import Target
from ..platform.timestamps import rfc3339
from .ports import wsgi_server

_TEMPLATES = Path(__file__).resolve().parent / "templates"
_env = jinja2.Environment(loader=jinja2.FileSystemLoader(_TEMPLATES), autoescape=True)


@dataclass
class Account:
    id: str
    email: str
    verification_id: str | None = None
    status: str = "pending"  # pending -> verified (webhook) | expired | locked | delivery failed
    events: list[str] = field(default_factory=list)  # event types received, in order
    error: str | None = None


class Site:
    """The site's state: accounts, and the webhook ids already handled (the receiver's dedup set)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.accounts: dict[str, Account] = {}
        self.seen_events: set[str] = set()
        self.duplicates = 0

    def new_account(self, email: str) -> Account:
        with self._lock:
            account = Account(f"demo-{next(self._ids)}-{secrets.token_hex(3)}", email)
            self.accounts[account.id] = account
            return account

    def apply(self, event_id: str, event_type: str, data: dict[str, Any]) -> bool:
        """True when the event was new; a resend of a handled webhook-id changes nothing."""
        with self._lock:
            if event_id in self.seen_events:
                self.duplicates += 1
                return False
            self.seen_events.add(event_id)
            account = self.accounts.get(str(data.get("account_id")))
            if account is None or account.verification_id != data.get("verification_id"):
                return True  # not ours (an older verification, another site): acknowledged, ignored
            account.events.append(event_type)
            if event_type == "verification.verified":
                account.status = "verified"
            elif account.status != "verified":
                account.status = {"verification.expired": "expired", "verification.locked": "locked"}.get(
                    event_type, "delivery failed" if event_type == "delivery.failed" else account.status
                )
            return True


def create_app(client: Any, webhook_secret: str, origin: str, site: Site | None = None) -> flask.Flask:
    """`client`: a signup_verification_client.Client for the running service; `origin` this site's."""
    from signup_verification_client import InvalidWebhook, VerificationError, verify_webhook

    site = site or Site()
    app = flask.Flask("demo_site")
    app.config["site"] = site

    def page(template: str, status: int = 200, **values: Any) -> flask.Response:
        html = _env.get_template(template).render(**values)
        return flask.Response(html, status, {"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store"})

    @app.get("/")
    def index() -> flask.Response:
        return page("demo.html", accounts=list(site.accounts.values())[::-1], account=None)

    @app.post("/signup")
    def signup() -> Any:  # a page, or flask.redirect's werkzeug Response
        email = (flask.request.form.get("email") or "").strip()
        account = site.new_account(email)
        try:
            created = client.create(account.id, "email", email, return_url=f"{origin}/accounts/{account.id}")
            account.verification_id = created.verification_id
        except VerificationError as exc:  # shown as a site would: the field errors, never the wait of a 429
            account.status = "not sent"
            account.error = "; ".join(e["detail"] for e in exc.errors) or exc.title
            return page("demo.html", 422, accounts=[], account=account)
        return flask.redirect(f"/accounts/{account.id}", 303)

    @app.get("/accounts/<account_id>")
    def account_page(account_id: str) -> flask.Response:
        account = site.accounts.get(account_id)
        if account is None:
            return page("demo.html", 404, accounts=[], account=None)
        service_status = None
        if account.verification_id:
            try:
                service_status = client.get(account.verification_id).status
            except VerificationError as exc:
                service_status = f"unknown ({exc.status})"
        return page("demo.html", account=account, accounts=[], service_status=service_status)

    @app.post("/webhooks")
    def webhooks() -> tuple[str, int]:
        try:
            event = verify_webhook(flask.request.get_data(), dict(flask.request.headers), webhook_secret)
        except InvalidWebhook:
            return "invalid signature", 400
        site.apply(event.id, event.type, event.data)
        return "", 204

    @app.get("/api/accounts/<account_id>")
    def account_json(account_id: str) -> Any:
        account = site.accounts.get(account_id)
        if account is None:
            return {"error": "no such account"}, 404
        return {
            "id": account.id,
            "status": account.status,
            "events": account.events,
            "at": rfc3339(datetime.now(UTC)),
        }

    return app


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:  # the account page polls: no line per request
        pass


class DemoSiteServer:
    """The demo site on `port`, in a thread of `verifyctl dev`."""

    def __init__(self, host: str, port: int, app: flask.Flask):
        self._server = wsgi_server(host, port, app, "demo site", threaded=True, request_handler=_QuietHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.1,), name="demo-site", daemon=True)

    def start(self) -> DemoSiteServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def build(
    host: str, port: int, origin: str, create_url: str, webhook_secret: str, signing_key: str | None
) -> DemoSiteServer:
    """The site as `verifyctl dev` runs it: the client library calls the emulation's create target
    (signing its requests when REQUEST_SIGNING_KEYS is configured, as an outside caller must)."""
    from signup_verification_client import Client, SignedRequests  # clients/python: dev.py installs it

    auth = SignedRequests.from_key(signing_key) if signing_key else None
    return DemoSiteServer(host, port, create_app(Client(create_url, auth=auth), webhook_secret, origin))


# -- the development webhook secret, shared by the emulated service and this site (wiring.py) ------------
SECRET_FILE = "dev-webhook-secret"  # a file name, not a secret  # nosec B105


def development_webhook_secret(local_dir: Path) -> str:
    """A `whsec_` secret generated once into the git-ignored local folder (mode 0600), like the
    development token key, and shared by the emulated service (WEBHOOK_SECRET) and this site."""
    import base64
    import os

    path = Path(local_dir) / SECRET_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return path.read_text(encoding="utf-8").strip()
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write("whsec_" + base64.b64encode(secrets.token_bytes(32)).decode())
    return path.read_text(encoding="utf-8").strip()


def create_signing_key(env: dict[str, str]) -> str | None:
    """The first REQUEST_SIGNING_KEYS entry that may sign for the create target, if any."""
    for entry in (e.strip() for e in (env.get("REQUEST_SIGNING_KEYS") or "").split(",")):
        if entry.count(":") == 1 or entry.startswith(f"{Target.CREATE}:"):
            return entry
    return None
