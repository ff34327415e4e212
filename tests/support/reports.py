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
from signup_verification.delivery import reports
from signup_verification.outbox import transitions as t
from signup_verification.outbox.config import ChannelPolicy, FailurePolicy, RetryPolicy
from signup_verification.outbox.transitions import Settlement
from support.dispatch import provider_settings
from support.factories import make_verifications
from support.policy import create_with_fallback

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


def call_form(sid: str, status: str | None = None, answered_by: str | None = None, **fields: str) -> dict[str, str]:
    """A call's callback as Twilio posts it: the status callback (CallStatus, with CallDuration once the
    call ends) or, with only `answered_by`, answering machine detection's own (AsyncAmdStatusCallback)."""
    form = {"CallSid": sid, "AccountSid": "AC" + "0" * 32}
    if status is not None:
        form |= {"CallStatus": status, "ApiVersion": "2010-04-01", "Direction": "outbound-api",
                 "From": "+15005550006", "To": "+14155550100", "CallbackSource": "call-progress-events"}  # fmt: skip
        if status in ("completed", "busy", "no-answer", "failed", "canceled"):
            form["CallDuration"] = "12" if status == "completed" else "0"
    if answered_by is not None:
        form["AnsweredBy"] = answered_by
        if status is None:
            form["MachineDetectionDuration"] = "2400"
    return {**form, **fields}


def phone_step(db, channel: str, *, after_seconds: int = 300, key: str = "phone", phone: str = "+14155550100") -> dict:
    """A verification whose first step went out on `channel` (whatsapp or voice: Twilio accepted it,
    its sid the attempt's reference) with an email fallback waiting: {intent_id, attempt_id, ref,
    verification_id, fallback_id}. Made through the real create path as an SMS step and then moved to
    the channel (the schema takes both channels; create does not offer them yet)."""
    from support.dispatch import provider_settings
    from support.policy import create_with_fallback

    config = provider_settings(rate_limit_prefix_per_hour=10_000, rate_limit_client_per_hour=10_000).create
    vid = create_with_fallback(db, config, channel="sms", after_seconds=after_seconds, key=key,
                               phone=phone, email=f"{key}@example.com", account=f"acct-{key}")  # fmt: skip
    [claimed] = t.claim(db, "worker", 10, 30)
    [begun] = t.begin_attempts(db, "worker", [claimed.fence])
    ref = ("CA" if channel == "voice" else "SM") + uuid.uuid4().hex
    t.settle(db, "worker", [Settlement(claimed.id, claimed.lease_version, "accepted", provider_ref=ref)])
    db.run("SET session_replication_role = replica")  # the attempt log is append-only: its trigger set aside
    try:
        for table, where in (("delivery_intents", "id = :i"), ("delivery_attempts", "intent_id = :i"),
                             ("create_events", "verification_id = :v AND role = 'primary'")):  # fmt: skip
            db.run(f"UPDATE {table} SET channel = :c WHERE {where}", c=channel, i=claimed.id, v=vid)  # nosec B608
    finally:
        db.run("RESET session_replication_role")
    db.run("UPDATE verifications SET channel = :c WHERE id = :v", c=channel, v=vid)
    fallback = db.one("SELECT id FROM delivery_intents WHERE verification_id = :v AND role = 'fallback'", v=vid)
    return {"intent_id": claimed.id, "attempt_id": begun.attempt_id, "ref": ref, "verification_id": vid,
            "fallback_id": fallback["id"]}  # fmt: skip


_EMAIL_RETRY_AT_ONCE = RetryPolicy(channels={"email": ChannelPolicy("retry", 0)})


def claimed_again(db) -> tuple[t.ClaimedIntent, uuid.UUID]:
    """An email step whose attempt 1 ended ambiguous, its hold over, and attempt 2 begun by a claim."""
    key = uuid.uuid4().hex[:8]
    vid = create_with_fallback(db, provider_settings().create, channel="email", after_seconds=300, key=key,
                               account=f"acct-{key}", email=f"{key}@example.com")  # fmt: skip
    first = _claim_of(db, "w1", vid)
    assert len(t.start(db, "w1", [first.fence])) == 1
    assert t.settle(db, "w1", [Settlement(first.id, first.lease_version, "ambiguous", error_class="timeout")])
    assert t.resolve_ambiguous(db, _EMAIL_RETRY_AT_ONCE, 10) == [(first.id, "email", "retryable")]
    second = _claim_of(db, "w2", vid)
    assert (second.id, second.attempts) == (first.id, 2)
    return second, vid


def _claim_of(db, owner: str, vid: uuid.UUID) -> t.ClaimedIntent:
    """The fused claim's intent of verification `vid`; whatever else it took is given back unsent."""
    claimed = t.claim(db, owner, 10, 30, begin=True)
    [mine] = [c for c in claimed if c.verification_id == vid]
    t.release(db, owner, [c.fence for c in claimed if c is not mine])
    return mine


def report_first_attempt(db, intent_id: int, event: str) -> None:
    """SendGrid's `event` (bounce or delivered) about the intent's attempt 1, ingested."""
    fields = {"status": "5.1.1", "type": "bounce"} if event == "bounce" else {}
    observation = reports.sendgrid_observation(sendgrid_event(intent_id, f"{intent_id}:1", event, **fields))
    reports.ingest(db, "sendgrid", [observation], FailurePolicy())
