"""A signup site's webhook endpoint that speaks HTTP for real and judges our signatures with the
Standard Webhooks reference library (`standardwebhooks`), as an integrating team would.

A request whose signature none of `secrets` verifies is answered 401 and not recorded. Accepted
events are kept in `deliveries` (destination = the webhook-id, body = the event type, request = the
verified JSON, headers as received); misbehaviour is scripted with `script(Answer(...))` as for the
providers (delay, reset after taking it, 429 with Retry-After, 5xx, redirects).

Every verified event is also validated against its JSON Schema in docs/openapi.yaml's `webhooks`
section (support.webhooks.event_violations): what does not conform is kept in `schema_violations`,
and leaving the receiver's `with` block with any fails the test that emitted them.
"""

from __future__ import annotations

import base64
import secrets as random_secrets
import threading

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from .http import Answer, FakeProvider, _Server


def new_secret() -> str:
    return "whsec_" + base64.b64encode(random_secrets.token_bytes(32)).decode()


class FakeWebhookReceiver(FakeProvider):
    name = "webhook-receiver"

    def __init__(self, *secrets: str, path: str = "/hooks/verification"):
        self.secrets = list(secrets) or [new_secret()]
        self.path = path
        self.refused = 0
        self.refusals: list[str] = []  # why, each time
        self.schema_violations: list[str] = []
        super().__init__()
        self.endpoint = self.url + path
        self._request = threading.local()

    def down(self) -> None:
        """The site's endpoint is killed: its port refuses connections until `up()`."""
        self.httpd.shutdown()
        self.httpd.server_close()

    def up(self) -> None:
        """Back on the same port (the same WEBHOOK_URL)."""
        self.httpd = _Server(("127.0.0.1", self.port), self.httpd.RequestHandlerClass)
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()

    def check_auth(self, path, headers):
        if path != self.path:
            return Answer(404, {"error": "not found"})
        return None

    def _handle(self, handler) -> None:
        # parse() gets the body only; the signature is in the headers (one handler thread per request)
        self._request.headers = {k.lower(): v for k, v in handler.headers.items()}
        super()._handle(handler)

    def parse(self, raw: bytes) -> tuple[str, str, dict]:
        headers = self._request.headers
        try:
            document = self.verify(raw, headers)
        except WebhookVerificationError as exc:
            raise ValueError(f"signature refused: {exc}") from None
        webhook_id, event_type = headers["webhook-id"], document["type"]
        self._check_schema(webhook_id, document)
        return webhook_id, event_type, document

    def _check_schema(self, webhook_id: str, document: dict) -> None:
        from support.webhooks import event_violations  # here: it needs the service's package, the fakes do not

        problems = event_violations(document)
        if problems:
            with self._lock:
                for problem in problems:  # a resent event repeats its problems: each is kept once
                    found = f"{webhook_id} {document.get('type')}: {problem}"
                    if found not in self.schema_violations:
                        self.schema_violations.append(found)

    def verify(self, raw: bytes, headers: dict[str, str]) -> dict:
        """The library's verdict with each secret we know; the first that verifies wins."""
        for secret in self.secrets:
            try:
                return Webhook(secret).verify(raw, headers)
            except WebhookVerificationError:
                continue
        raise WebhookVerificationError("no secret verifies the signature")

    def success(self, destination, fields) -> Answer:
        return Answer(204)

    def invalid(self, reason: str) -> Answer:
        with self._lock:
            self.refused += 1
            self.refusals.append(reason)
        return Answer(401, {"error": reason})

    def __exit__(self, exc_type, *exc):
        super().__exit__(exc_type, *exc)
        if exc_type is None and self.schema_violations:
            shown = "\n".join(self.schema_violations[:20])
            raise AssertionError(f"webhook events that do not match docs/openapi.yaml's schemas:\n{shown}")

    def events(self) -> list[dict]:
        """The verified bodies, in arrival order (duplicates included)."""
        with self._lock:
            return [d.request for d in self.deliveries]

    def webhook_ids(self) -> list[str]:
        with self._lock:
            return [d.destination for d in self.deliveries]
