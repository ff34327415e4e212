"""The create request a site sends, over HTTP: to the create target's test client (flask's, in this
process) or to its URL (requests, on loopback: a served target or `verifyctl dev`). Each gets its own
Idempotency-Key unless one is given. (support/factories.py creates below HTTP, through the same path.)"""

from __future__ import annotations

import uuid
from typing import Any

import requests


def signup_body(destination: str = "", **fields: Any) -> dict:
    """A create request's JSON: a fresh account, the channel of the destination (an address or a
    number; a fresh address when none is given) unless `channel=` says, and any other field as given."""
    unique = uuid.uuid4().hex[:8]
    destination = destination or f"ada.{unique}@example.com"
    channel = "email" if "@" in destination else "sms"
    return {"account_id": f"acct-{unique}", "channel": channel, "destination": destination, **fields}


def post_create(to: Any, body: dict, key: str | None = None) -> Any:
    """POST `body` to `to`, a create target's test client or its URL; the response."""
    headers = {"Idempotency-Key": key or uuid.uuid4().hex}
    if isinstance(to, str):
        return requests.post(to, json=body, headers=headers, timeout=30)
    return to.post("/", json=body, headers=headers)


def created_json(to: Any, body: dict, key: str | None = None) -> dict:
    """post_create(), which must answer 201: the answer's JSON."""
    answer = post_create(to, body, key)
    if isinstance(answer, requests.Response):
        assert answer.status_code == 201, answer.text
        return answer.json()
    assert answer.status_code == 201, answer.get_data(as_text=True)
    return answer.get_json()
