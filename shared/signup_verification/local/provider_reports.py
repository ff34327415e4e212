"""What the local mailbox's emulated providers report afterwards: signed SendGrid
Event Webhook batches for the emails it received, signed Twilio status callbacks for the SMS its
fake Twilio accepted, posted to the local `delivery_reports` target as the providers post them.

- email: `delivered` `delay` seconds after the message arrived (SendGrid batches its events), or
  at once with "Report now"; "Bounce this" posts a hard `bounce` instead (5.1.1, as SendGrid
  reports an address that does not exist). The sandbox's addresses (sandbox.py) are reported
  so by themselves: `bounce@…` bounces, `spam@…` is delivered and then reported as spam. Each event carries sg_event_id, sg_message_id
  (`<queue id>.<filter>`: the SMTP queue id the dispatcher stored as the provider reference) and
  our custom_args intent_id / attempt_id, taken from the message's X-Delivery-Attempt header.
- SMS: `queued`, `sent`, then `delivered` to the StatusCallback the create request carried; the
  sandbox numbers of sandbox.SMS_REPORTS end `undelivered` or `failed` with Twilio's error code instead.
- WhatsApp (a `whatsapp:` message): the same, then `read`, with `ChannelPrefix=whatsapp`; the numbers
  of sandbox.WHATSAPP_REPORTS end `undelivered` or `failed` with their 63xxx code.
- a call (a `CA…` sid): answering machine detection's result (`AnsweredBy`, to the
  AsyncAmdStatusCallback, which the voice channel points at the same URL), then the status callback
  `completed`; the numbers of sandbox.CALL_REPORTS end `busy`, `no-answer` or `failed` (one status
  callback, nothing to detect) or are answered by a machine (`machine_start`: the report path then
  ends the call through the Calls API before its `completed`).

Signatures are the real ones (api/report_signatures.py checks them): ECDSA P-256 over timestamp +
body under the development key (generated once into the local folder), and HMAC-SHA1 under the
fake Twilio's auth token. A report the target refuses is shown on the message, never retried.
"""

from __future__ import annotations

import base64
import functools
import heapq
import itertools
import json
import os
import secrets
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from ..api.report_signatures import twilio_signature
from . import sandbox
from .mailstore import Mailbox, Message

KEY_FILE = "dev-sendgrid-webhook-key.pem"  # a file name, not a secret  # nosec B105
SMS_STEP_SECONDS = 0.5  # between queued, sent and the final status


def development_sendgrid_key(local_dir: Path) -> ec.EllipticCurvePrivateKey:
    """The mailbox's SendGrid signing key, generated once into the git-ignored local folder (0600)."""
    path = Path(local_dir) / KEY_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # another process won the race: use its key
        else:
            with os.fdopen(fd, "wb") as out:
                out.write(pem)
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{path} is not an ECDSA key: delete it to have a new one generated")
    return key


def public_key_setting(key: ec.EllipticCurvePrivateKey) -> str:
    """SENDGRID_WEBHOOK_PUBLIC_KEY as SendGrid shows it: base64 DER SubjectPublicKeyInfo."""
    der = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(der).decode("ascii")


@dataclass(order=True)
class _Job:
    due: float
    seq: int
    message_id: int = field(compare=False)
    state: str = field(compare=False)
    post: Callable[[], str] = field(compare=False)


class Reporter:
    """Posts the reports from one background thread, each when it is due."""

    def __init__(
        self,
        mailbox: Mailbox,
        *,
        sendgrid_url: str | None = None,
        sendgrid_key: ec.EllipticCurvePrivateKey | None = None,
        twilio_account_sid: str | None = None,
        twilio_auth_token: str | None = None,
        delay: float = 10.0,
        timeout: float = 10.0,
    ) -> None:
        self.mailbox, self.delay, self.timeout = mailbox, delay, timeout
        self._sendgrid_url, self._sendgrid_key = sendgrid_url, sendgrid_key
        self._twilio_sid, self._twilio_token = twilio_account_sid, twilio_auth_token
        self._jobs: list[_Job] = []
        self._seq = itertools.count()
        self._wake = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="mailbox-reports", daemon=True)

    @property
    def sends_email_reports(self) -> bool:
        return self._sendgrid_url is not None and self._sendgrid_key is not None

    def start(self) -> Reporter:
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._wake:
            self._stopped = True
            self._wake.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout=self.timeout + 1)

    # -- what the mailbox tells it ------------------------------------------------------------------
    def email_received(self, message: Message) -> None:
        if not self.sends_email_reports:
            return
        behaviour = sandbox.email_behaviour(message.recipients[0]) if message.recipients else None
        if behaviour == "bounce":
            self.mailbox.set_delivery(message.id, "sent", f"SendGrid reports a bounce in {self.delay:g} s (sandbox)")
            self._schedule(message.id, "bounced", self.delay, lambda: self._sendgrid(message, "bounce"))
            return
        self.mailbox.set_delivery(message.id, "sent", f"SendGrid reports delivered in {self.delay:g} s")
        self._schedule(message.id, "delivered", self.delay, lambda: self._sendgrid(message, "delivered"))
        if behaviour == "spam":
            after = self.delay + sandbox.SPAM_REPORT_AFTER_SECONDS
            self._schedule(message.id, "spam reported", after, lambda: self._sendgrid(message, "spamreport"))

    def sms_accepted(self, message: Message) -> None:
        """A message (SMS or WhatsApp) or a call the fake Twilio took: its callbacks, each when due."""
        if not (message.status_callback and self._twilio_token):
            return
        if (message.sid or "").startswith("CA"):
            forms = call_callbacks(message, sandbox.CALL_REPORTS.get(_number(message), "human"), self._twilio_sid or "")
            self.mailbox.set_delivery(message.id, "accepted", f"Twilio reports the call in {self.delay:g} s")
            for step, (state, form) in enumerate(forms):
                self._schedule(message.id, state, self.delay + step * SMS_STEP_SECONDS,
                               functools.partial(self._twilio_form, message, state, form))  # fmt: skip
            return
        reports = sandbox.WHATSAPP_REPORTS if _whatsapp(message) else sandbox.SMS_REPORTS
        final, code = reports.get(_number(message), ("delivered", None))
        self.mailbox.set_delivery(message.id, "accepted", f"Twilio reports {final} in {self.delay:g} s")
        statuses = ("queued", "sent", final, *(("read",) if _whatsapp(message) and final == "delivered" else ()))
        for step, status in enumerate(statuses):
            post: Callable[[], str] = functools.partial(
                self._twilio, message, status, code if status == final else None
            )
            self._schedule(message.id, status, self.delay + step * SMS_STEP_SECONDS, post)

    def pending(self, message_id: int) -> list[str]:
        """The states still to be reported for this message, in order."""
        with self._wake:
            return [j.state for j in sorted(self._jobs) if j.message_id == message_id]

    def report_now(self, message_id: int) -> None:
        """Everything pending for this message, due now (the mailbox's Report now button)."""
        with self._wake:
            now = time.monotonic()
            for job in self._jobs:
                if job.message_id == message_id:
                    job.due = min(job.due, now)
            heapq.heapify(self._jobs)
            self._wake.notify_all()

    def bounce(self, message: Message) -> str:
        """A hard bounce instead of the pending delivered report, posted now; the target's answer."""
        if not self.sends_email_reports or message.kind != "email":
            return "this mailbox posts no SendGrid reports"
        with self._wake:
            self._jobs = [j for j in self._jobs if j.message_id != message.id]
            heapq.heapify(self._jobs)
        return self._report(message.id, "bounced", lambda: self._sendgrid(message, "bounce"))

    # -- the thread ---------------------------------------------------------------------------------
    def _schedule(self, message_id: int, state: str, after: float, post: Callable[[], str]) -> None:
        with self._wake:
            heapq.heappush(self._jobs, _Job(time.monotonic() + after, next(self._seq), message_id, state, post))
            self._wake.notify_all()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._stopped and (not self._jobs or self._jobs[0].due > time.monotonic()):
                    self._wake.wait(None if not self._jobs else self._jobs[0].due - time.monotonic())
                if self._stopped:
                    return
                job = heapq.heappop(self._jobs)
            self._report(job.message_id, job.state, job.post)

    def _report(self, message_id: int, state: str, post: Callable[[], str]) -> str:
        try:
            note = post()
        except Exception as exc:  # noqa: BLE001 - the mailbox shows why; the emulation carries on
            note = f"not posted: {type(exc).__name__}: {exc}"
        self.mailbox.set_delivery(message_id, state, note)
        return note

    # -- the providers' formats ---------------------------------------------------------------------
    def _sendgrid(self, message: Message, event: str) -> str:
        if self._sendgrid_url is None or self._sendgrid_key is None:
            return "this mailbox posts no SendGrid reports"
        body = json.dumps([sendgrid_event(message, event)]).encode()
        stamp = str(int(time.time()))
        signature = self._sendgrid_key.sign(stamp.encode() + body, ec.ECDSA(hashes.SHA256()))
        headers = {
            "Content-Type": "application/json",
            "X-Twilio-Email-Event-Webhook-Signature": base64.b64encode(signature).decode(),
            "X-Twilio-Email-Event-Webhook-Timestamp": stamp,
        }
        return f"SendGrid {event}: " + self._post(self._sendgrid_url, body, headers)

    def _twilio(self, message: Message, status: str, error_code: int | None) -> str:
        return self._twilio_form(message, status, twilio_callback(message, status, error_code, self._twilio_sid or ""))

    def _twilio_form(self, message: Message, status: str, form: dict[str, str]) -> str:
        if message.status_callback is None or self._twilio_token is None:
            return "no StatusCallback: Twilio reports nothing"
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Twilio-Signature": twilio_signature(self._twilio_token, message.status_callback, list(form.items())),
        }
        return f"Twilio {status}: " + self._post(message.status_callback, urlencode(form).encode(), headers)

    def _post(self, url: str, body: bytes, headers: dict[str, str]) -> str:
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310 - http(s) only
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:  # nosec B310 - our own URL
                return f"{answer.status} " + _summary(answer.read(4000))
        except urllib.error.HTTPError as exc:
            return f"refused {exc.code} " + _summary(exc.read(4000))


def _summary(body: bytes) -> str:
    """The target's answer in a few words: its non-zero counts, or the problem's title."""
    try:
        answer = json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")[:200]
    if isinstance(answer, dict) and "title" in answer:
        return str(answer["title"])
    if isinstance(answer, dict):
        return ", ".join(f"{k} {v}" for k, v in answer.items() if v) or "nothing"
    return str(answer)[:200]


def sendgrid_event(message: Message, event: str) -> dict[str, object]:
    """One event as SendGrid's Event Webhook posts it (custom_args at the top level)."""
    fields: dict[str, object] = {
        "email": message.recipients[0] if message.recipients else "",
        "timestamp": int(time.time()),
        "event": event,
        "sg_event_id": base64.urlsafe_b64encode(secrets.token_bytes(16)).decode().rstrip("="),
        "sg_message_id": f"{message.sid}.filterdrecv-local-{message.id}",
        "smtp-id": next((v for k, v in message.headers if k.lower() == "message-id"), ""),
        "category": [],
    }
    attempt_id = message.attempt_id
    if attempt_id and ":" in attempt_id:
        fields.update(intent_id=attempt_id.split(":", 1)[0], attempt_id=attempt_id)
    if event == "delivered":
        fields["response"] = "250 2.0.0 OK"
    elif event == "spamreport":
        pass  # SendGrid's spam report carries no reason: the event is the reason
    else:
        fields.update(
            type="bounce",
            status="5.1.1",
            reason="550 5.1.1 The email account that you tried to reach does not exist.",
            bounce_classification="Invalid Address",
        )
    return fields


def twilio_callback(message: Message, status: str, error_code: int | None, account_sid: str) -> dict[str, str]:
    """A message's status callback's form as Twilio posts it (a WhatsApp one names its channel)."""
    form = {
        "AccountSid": account_sid,
        "ApiVersion": "2010-04-01",
        "From": message.sender,
        "MessageSid": message.sid or "",
        "MessageStatus": status,
        "SmsSid": message.sid or "",
        "SmsStatus": status,
        "To": message.recipients[0],
    }
    if _whatsapp(message):
        form |= {"ChannelPrefix": "whatsapp", "To": "whatsapp:" + _number(message)}
    if error_code is not None:
        form["ErrorCode"] = str(error_code)
    return form


def call_callbacks(message: Message, outcome: str, account_sid: str) -> list[tuple[str, dict[str, str]]]:
    """A call's callbacks as Twilio posts them, in order, as (the mailbox's state, form): for `human`
    or `machine`, detection's result (AsyncAmdStatusCallback: CallSid, AnsweredBy,
    MachineDetectionDuration) then the status callback `completed`; for `busy`, `no-answer`, `failed`
    or `canceled`, that status callback alone."""
    sid = message.sid or ""
    status = {"AccountSid": account_sid, "ApiVersion": "2010-04-01", "CallSid": sid, "From": message.sender,
              "To": _number(message), "Direction": "outbound-api", "CallbackSource": "call-progress-events",
              "SequenceNumber": "0"}  # fmt: skip
    if outcome not in ("human", "machine"):
        return [(outcome, {**status, "CallStatus": outcome, "CallDuration": "0"})]
    answered_by = "human" if outcome == "human" else "machine_start"
    detected = {
        "AccountSid": account_sid,
        "CallSid": sid,
        "AnsweredBy": answered_by,
        "MachineDetectionDuration": "2400",
    }
    return [(f"answered by {answered_by}", detected), ("completed", {**status, "CallStatus": "completed",
                                                                     "CallDuration": "12"})]  # fmt: skip


def _number(message: Message) -> str:
    return message.recipients[0].removeprefix("whatsapp:") if message.recipients else ""


def _whatsapp(message: Message) -> bool:
    return message.kind == "whatsapp" or bool(message.recipients and message.recipients[0].startswith("whatsapp:"))
