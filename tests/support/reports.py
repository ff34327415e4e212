"""Delivery reports as the providers send them: signed SendGrid batches, signed Twilio
callbacks, and accepted deliveries with provider references to report about."""

from __future__ import annotations

import base64
import json
import time
import uuid
from urllib.parse import urlencode

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from signup_verification.api.report_signatures import twilio_signature
from signup_verification.outbox import transitions as t
from signup_verification.outbox.transitions import Settlement
from support.factories import make_verifications

REPORTS_URL = "https://reports.example.org/delivery_reports"
TWILIO_TOKEN = "twilio-report-token"  # nosec B105: a test value
SIGNING_KEY = ec.generate_private_key(ec.SECP256R1())
PUBLIC_KEY = base64.b64encode(
    SIGNING_KEY.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
).decode()


def reports_env(**extra: str) -> dict[str, str]:
    return {
        "DELIVERY_REPORTS_URL": REPORTS_URL,
        "SENDGRID_WEBHOOK_PUBLIC_KEY": PUBLIC_KEY,
        "TWILIO_AUTH_TOKEN": TWILIO_TOKEN,
        **extra,
    }


def sendgrid_headers(body: bytes, timestamp: int | None = None, key=SIGNING_KEY) -> dict[str, str]:
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    signature = key.sign(stamp.encode() + body, ec.ECDSA(hashes.SHA256()))
    return {
        "X-Twilio-Email-Event-Webhook-Signature": base64.b64encode(signature).decode(),
        "X-Twilio-Email-Event-Webhook-Timestamp": stamp,
        "Content-Type": "application/json",
    }


def sendgrid_event(intent_id: int, attempt_id: str, event: str = "delivered", **fields) -> dict:
    return {
        "email": "someone@example.com",
        "timestamp": int(time.time()),
        "event": event,
        "sg_event_id": uuid.uuid4().hex,
        "sg_message_id": f"msg-{intent_id}.filterdrecv-1",
        "intent_id": str(intent_id),
        "attempt_id": attempt_id,
        **fields,
    }


def twilio_form(sid: str, status: str, **fields: str) -> dict[str, str]:
    return {"MessageSid": sid, "SmsSid": sid, "MessageStatus": status, "AccountSid": "AC" + "0" * 32, **fields}


def twilio_post(form: dict[str, str], token: str = TWILIO_TOKEN, url: str = REPORTS_URL + "/twilio"):
    """(body, headers) of a status callback signed as Twilio signs it."""
    return urlencode(form).encode(), {
        "X-Twilio-Signature": twilio_signature(token, url, list(form.items())),
        "Content-Type": "application/x-www-form-urlencoded",
    }


def accepted(db, n: int = 1, channel: str = "email", prefix: str = "rep") -> list[dict]:
    """n verifications delivered (claimed, begun, settled accepted) with a provider reference each:
    [{intent_id, attempt_id, ref, verification_id}]."""
    ids = make_verifications(db, n, channel, prefix=prefix)
    claimed = t.claim(db, "worker", n, 30)
    begun = {b.intent_id: b.attempt_id for b in t.begin_attempts(db, "worker", [c.fence for c in claimed])}
    refs = {c.id: (f"msg-{c.id}" if channel == "email" else "SM" + uuid.uuid4().hex) for c in claimed}
    t.settle(db, "worker", [Settlement(c.id, c.lease_version, "accepted", provider_ref=refs[c.id]) for c in claimed])
    by_verification = {c.verification_id: c.id for c in claimed}
    return [
        {
            "intent_id": by_verification[v],
            "attempt_id": begun[by_verification[v]],
            "ref": refs[by_verification[v]],
            "verification_id": v,
        }  # fmt: skip
        for v in ids
    ]


def post_sendgrid(client, events: list[dict], **header_overrides):
    body = json.dumps(events).encode()
    headers = {**sendgrid_headers(body), **header_overrides}
    return client.post("/sendgrid", data=body, headers=headers)
