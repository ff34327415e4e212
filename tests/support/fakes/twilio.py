"""A local HTTP server answering as Twilio's Messages and Calls APIs do (FakeProvider, http.py):
SMS and WhatsApp template messages, calls with inline TwiML, the Messages and Calls list APIs. It
also ends a call on request (`POST .../Calls/<sid>.json`, `Status=completed`); twilio_callbacks.py
writes the status callbacks it would post, for the outcome a test chooses per destination (`outcomes`).
"""

from __future__ import annotations

import base64
import email.utils
import json
import re
import time
import uuid
import xml.etree.ElementTree as ET  # nosec B405: parses the TwiML our own adapter sent
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs

from signup_verification.delivery import templates
from signup_verification.local import fake_twilio

from .http import Answer, Delivery, Exchange, FakeProvider


class FakeTwilio(FakeProvider):
    """POST /2010-04-01/Accounts/{sid}/Messages.json, form-encoded, HTTP Basic; 201 + JSON with sid."""

    name = "twilio"

    def __init__(self, account_sid: str = "AC" + "0123456789abcdef" * 2, auth_token: str = "twilio-token"):
        self.account_sid = account_sid
        self.auth_token = auth_token
        self.messages: dict[int, dict] = {}  # id(delivery) -> its Message resource (sid, date_created)
        self.list_answers: deque[Answer] = deque()  # scripted answers of the Messages and Calls list APIs
        self.list_requests: list[str] = []
        self.contents = {sid: locale for locale, sid in whatsapp_contents().items()}  # approved templates
        self.calls: dict[str, dict] = {}  # sid -> the Call resource of each call placed (its status as it goes)
        self.outcomes: dict[str, str] = {}  # destination -> the outcome its callbacks report (twilio_callbacks.py)
        # run with (sid, To, form) once a message or call is created and before Twilio answers the request:
        # a test posts its status callbacks there, ahead of the sender's settle (twilio_callbacks.py)
        self.before_answer: Callable[[str, str, dict], None] | None = None
        super().__init__()

    def message(self, delivery: Delivery) -> dict:
        """The Message or Call resource of a recorded delivery (one sid per delivery, also after a 5xx or
        reset): what the list APIs show of it."""
        with self._lock:
            return self.messages.setdefault(
                id(delivery),
                {
                    "sid": ("CA" if _is_call(delivery) else "SM") + uuid.uuid4().hex,
                    "to": delivery.destination,
                    "from": delivery.request.get("From"),
                    "date_created": email.utils.format_datetime(datetime.now(UTC)),
                    "status": "queued",
                },
            )

    def get(self, path, headers):
        """GET Messages.json or Calls.json ?To=&From=: the list APIs (newest first), as the reconciler asks them."""
        base, _, query = path.partition("?")
        self.list_requests.append(path)
        denied = self.check_auth(base, headers)
        if denied is not None:
            return denied
        if self.list_answers:
            return self.list_answers.popleft()
        filters = {k: v[0] for k, v in parse_qs(query).items()}
        calls = base.endswith("/Calls.json")
        found = [
            self.message(d)
            for d in reversed(list(self.deliveries))
            if _is_call(d) == calls
            and d.destination == filters.get("To")
            and ("From" not in filters or d.request.get("From") == filters["From"])
        ]
        key = "calls" if calls else "messages"
        return Answer(200, {key: found, "page": 0, "page_size": len(found), "uri": base, "next_page_uri": None})

    @staticmethod
    def error(status: int, code: int, message: str = "error", **extra) -> Answer:
        return Answer(
            status,
            {
                "code": code,
                "message": message,
                "more_info": f"https://www.twilio.com/docs/errors/{code}",
                "status": status,
            },
            **extra,
        )

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        if _CALL_UPDATE.fullmatch(handler.path) and handler.path.startswith(self.account + "/"):
            return self._update_call(handler)
        super()._handle(handler)

    def _update_call(self, handler: BaseHTTPRequestHandler) -> None:
        """POST .../Calls/<sid>.json: `Status=completed` ends a call in progress (200, its resource); a
        call already over answers 21220, an unknown sid 20404. A scripted answer comes first."""
        raw = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        headers = dict(handler.headers.items())
        request = Exchange(handler.command, handler.path, headers, raw)
        with self._lock:
            self.requests += 1
        expected = "Basic " + base64.b64encode(f"{self.account_sid}:{self.auth_token}".encode()).decode()
        form = {k: v[0] for k, v in parse_qs(raw.decode(), keep_blank_values=True).items()}
        sid = handler.path.rsplit("/", 1)[-1].removesuffix(".json")
        with self._lock:
            scripted = self._script.popleft() if self._script else None
            call = self.calls.get(sid)
            if scripted is not None:
                answer = scripted
            elif headers.get("Authorization") != expected:
                answer = self.error(401, 20003, "Authenticate")
            elif form.get("Status") not in ("completed", "canceled"):
                answer = self.error(400, 21200, "Calls Resource: only Status=completed or canceled here")
            elif call is None:
                answer = self.error(404, 20404, f"The requested resource {handler.path} was not found")
            elif call["status"] not in ("queued", "ringing", "in-progress"):
                answer = self.error(400, 21220, "Call is not in-progress. Cannot redirect.")
            else:
                call.update(status="completed", end_time=email.utils.format_datetime(datetime.now(UTC)))
                answer = Answer(200, dict(call))
        if answer.delay:
            time.sleep(answer.delay)
        self._respond(handler, answer, request)

    def check_auth(self, path, headers):
        if path not in (f"{self.account}/Messages.json", f"{self.account}/Calls.json"):
            return self.error(404, 20404, "The requested resource was not found")
        expected = "Basic " + base64.b64encode(f"{self.account_sid}:{self.auth_token}".encode()).decode()
        if headers.get("Authorization") != expected:
            return self.error(401, 20003, "Authenticate")
        return None

    def parse(self, raw):
        form = {k: v[0] for k, v in parse_qs(raw.decode(), keep_blank_values=True).items()}
        to = form.get("To", "")
        if not to.removeprefix("whatsapp:").startswith("+"):
            raise ValueError("invalid To")
        if "Twiml" in form:  # a call: what its <Say> speaks
            say = ET.fromstring(form["Twiml"].encode()).find("Say")
            return to, say.text if say is not None and say.text else "", form
        if "ContentSid" in form:  # a content template: Twilio renders it with its variables
            return to, self.content(form["ContentSid"], json.loads(form["ContentVariables"])), form
        if to.startswith("whatsapp:"):
            raise ValueError("content: a WhatsApp message outside a session must be a template")
        return to, form["Body"], form

    def content(self, sid: str, variables: dict) -> str:
        """An approved WhatsApp authentication template (whatsapp_contents), rendered with its one variable."""
        locale = self.contents.get(sid)
        if locale is None or set(variables) != {"1"}:
            raise ValueError("content: unknown ContentSid or variables that do not match it")
        return templates.render(templates.current_version("signup"), locale, "whatsapp", code=variables["1"]).strip()

    @property
    def account(self) -> str:
        return f"/2010-04-01/Accounts/{self.account_sid}"

    def success(self, destination, fields):
        answer = self.call(destination, fields) if "Twiml" in fields else self.sent(destination, fields)
        if self.before_answer is not None:
            self.before_answer(answer.body["sid"], destination, fields)
        return answer

    def call(self, destination, fields):
        """Twilio's 201 Call resource of a queued call (the sid the Calls list shows for it)."""
        placed = next((d for d in reversed(self.deliveries) if d.destination == destination and _is_call(d)), None)
        sid = self.message(placed)["sid"] if placed is not None else "CA" + uuid.uuid4().hex
        now = email.utils.format_datetime(datetime.now(UTC))
        uri = f"{self.account}/Calls/{sid}"
        resource = self.placed(
            sid,
            {
                "sid": sid,
                "account_sid": self.account_sid,
                "api_version": "2010-04-01",
                "status": "queued",
                "to": destination,
                "to_formatted": destination,
                "from": fields.get("From"),
                "from_formatted": fields.get("From"),
                "direction": "outbound-api",
                "answered_by": None,
                "date_created": now,
                "date_updated": now,
                "start_time": None,
                "end_time": None,
                "duration": None,
                "price": None,
                "price_unit": "USD",
                "uri": f"{uri}.json",
                "subresource_uris": {"recordings": f"{uri}/Recordings.json"},
            },
        )
        return Answer(201, dict(resource))

    def placed(self, sid: str, resource: dict | None = None) -> dict:
        """Record a call as placed (the test's own, when `resource` is None): the update endpoint knows it."""
        with self._lock:
            return self.calls.setdefault(sid, resource or {"sid": sid, "account_sid": self.account_sid,
                                                            "status": "queued", "answered_by": None})  # fmt: skip

    def sent(self, destination, fields):
        """Twilio's 201 Message resource (the fields its spec describes that a queued message has)."""
        delivered = next(
            (d for d in reversed(self.deliveries) if d.destination == destination and not _is_call(d)), None
        )
        sid = self.message(delivered)["sid"] if delivered is not None else "SM" + uuid.uuid4().hex
        now = email.utils.format_datetime(datetime.now(UTC))
        uri = f"/2010-04-01/Accounts/{self.account_sid}/Messages/{sid}"
        return Answer(
            201,
            {
                "sid": sid,
                "account_sid": self.account_sid,
                "api_version": "2010-04-01",
                "status": "queued",
                "to": destination,
                "from": fields.get("From"),
                "messaging_service_sid": fields.get("MessagingServiceSid"),
                "body": fields.get("Body"),
                "direction": "outbound-api",
                "num_segments": "1",
                "num_media": "0",
                "date_created": now,
                "date_updated": now,
                "date_sent": None,
                "error_code": None,
                "error_message": None,
                "price": None,
                "price_unit": "USD",
                "uri": f"{uri}.json",
                "subresource_uris": {"media": f"{uri}/Media.json"},
            },
        )

    def invalid(self, reason):
        if reason.startswith("content"):
            return self.error(400, 63027, "Template does not exist for a language and locale")
        return self.error(400, 21211, "The 'To' number is not a valid phone number.")


def _is_call(delivery: Delivery) -> bool:
    return "Twiml" in delivery.request


_CALL_UPDATE = re.compile(r"/2010-04-01/Accounts/AC[0-9a-f]{32}/Calls/CA[0-9a-fA-F]{32}\.json")


def whatsapp_contents() -> dict[str, str]:
    """A content SID per language of the signup templates: the approved WhatsApp templates the fake
    knows, the same as the local emulation's (`verifyctl dev`)."""
    return fake_twilio.content_sids()
