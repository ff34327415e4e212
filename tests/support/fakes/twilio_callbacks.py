"""The status callbacks Twilio posts about a message or a call the fake Twilio (http.py) took, as
Twilio posts them: form-encoded, signed with X-Twilio-Signature under the auth token for the
StatusCallback URL, in Twilio's order, for the outcome a test chooses per destination
(`FakeTwilio.outcomes`) or names.

* a message (SM...): `queued`, `sent`, then `delivered` and, on WhatsApp, `read`;
  `undelivered:<code>` or `failed:<code>` end it with that ErrorCode instead;
* a call (CA...): `human` (detection's AnsweredBy `human`, then `completed`), `machine` (detection's
  `machine_start` while the call goes on; `completed` once it is over: the report path ends it),
  `busy`, `no-answer`, `failed`, `canceled` (the status callback alone: nobody answered, nothing to
  detect).
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlencode

from signup_verification.api.report_signatures import twilio_signature

from .twilio import FakeTwilio

SENDER = "+15005550006"


def callbacks(fake: FakeTwilio, sid: str, to: str, outcome: str | None = None) -> list[dict[str, str]]:
    """The forms Twilio posts about `sid` (sent to `to`), in order. A call's resource follows: answered
    (in progress) by a person or a machine, or over with its status."""
    outcome = outcome or fake.outcomes.get(to) or ("human" if sid.startswith("CA") else "delivered")
    base = {"AccountSid": fake.account_sid, "ApiVersion": "2010-04-01"}
    if sid.startswith("CA"):
        return _call(fake, base, sid, to, outcome)
    final, _, code = outcome.partition(":")
    whatsapp = to.startswith("whatsapp:")
    message = {**base, "MessageSid": sid, "SmsSid": sid, "From": SENDER, "To": to}
    if whatsapp:
        message |= {"ChannelPrefix": "whatsapp", "From": "whatsapp:" + SENDER}
    statuses = ["queued", "sent", final] + (["read"] if whatsapp and final == "delivered" else [])
    return [
        {**message, "MessageStatus": s, "SmsStatus": s, **({"ErrorCode": code} if s == final and code else {})}
        for s in statuses
    ]


def _call(fake: FakeTwilio, base: dict[str, str], sid: str, to: str, outcome: str) -> list[dict[str, str]]:
    status = {**base, "CallSid": sid, "From": SENDER, "To": to, "Direction": "outbound-api",
              "CallbackSource": "call-progress-events", "SequenceNumber": "0"}  # fmt: skip
    resource = fake.placed(sid)
    if outcome in ("human", "machine"):
        answered_by = "human" if outcome == "human" else "machine_start"
        resource.update(status="in-progress", answered_by=answered_by)
        detected = {"CallSid": sid, "AccountSid": fake.account_sid, "AnsweredBy": answered_by,
                    "MachineDetectionDuration": "2400"}  # fmt: skip
        return [detected, {**status, "CallStatus": "completed", "CallDuration": "12"}]
    resource.update(status=outcome)
    return [{**status, "CallStatus": outcome, "CallDuration": "0"}]


def post_callbacks(
    fake: FakeTwilio, url: str, sid: str, to: str, send: Callable[[bytes, dict[str, str]], int],
    outcome: str | None = None,
) -> list[int]:  # fmt: skip
    """Each callback, signed for `url`, handed to `send(body, headers)` in order; what it answered. A
    call a machine answered goes on until it is ended (the report path's hang-up, which `send` runs
    before it returns) or reaches its time limit: then it completes."""
    answered = []
    for form in callbacks(fake, sid, to, outcome):
        if form.get("CallStatus") == "completed":
            fake.placed(sid)["status"] = "completed"
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Twilio-Signature": twilio_signature(fake.auth_token, url, list(form.items())),
        }
        answered.append(send(urlencode(form).encode(), headers))
    return answered
