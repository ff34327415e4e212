"""Ending a call that a machine answered: Twilio's Calls API update
(POST /2010-04-01/Accounts/{AccountSid}/Calls/{CallSid}.json, `Status=completed`, form-encoded,
HTTP Basic as every Twilio request).

The voice channel asks for answering machine detection in the background (AsyncAmd): the call's
inline TwiML starts reading the code as soon as it is answered, and detection's result comes later
to the delivery reports' URL. `MachineDetection=Enable` reports a machine as soon as its greeting is
recognised (`machine_start`), while the greeting still plays and before a voicemail box records
anything: ending the call then leaves no code on the voicemail. The report path calls this only for
a verified (signed) detection report it has just stored about a call of ours, after the report is
committed, so a failure here never loses the report; the call then ends at its own time limit
(`TimeLimit`, the voice channel's) and the code may be left on the voicemail (logged).

Bounded: one request, no retry, at most `timeout` seconds (Twilio waits 15 s for the report's answer).
Idempotent: ending a call that is already over changes nothing; Twilio answers it 200 (the call's
resource) or refuses it as not in progress (21220), both "over".
"""

from __future__ import annotations

import time
from base64 import b64encode
from dataclasses import dataclass
from urllib.parse import quote, urlencode

from ..platform.redaction import scrub
from .channels.http import HttpClient, HttpFailure
from .channels.twilio import _error as twilio_error  # Twilio's error body, as the adapters read it

CALL_NOT_IN_PROGRESS = 21220  # "Invalid call state for the requested action": the call is over already
TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True)
class CallEnd:
    over: bool  # the call is over (ended now, or already)
    detail: str


def end_call(account_sid: str, auth_token: str, api_url: str, call_sid: str,
             timeout: float | None = None) -> CallEnd:  # fmt: skip
    """End the call now (`Status=completed`) within `timeout` (TIMEOUT_SECONDS); never raises."""
    timeout = TIMEOUT_SECONDS if timeout is None else timeout
    url = (f"{api_url.rstrip('/')}/2010-04-01/Accounts/{quote(account_sid, safe='')}"
           f"/Calls/{quote(call_sid, safe='')}.json")  # fmt: skip
    headers = {
        "Authorization": "Basic " + b64encode(f"{account_sid}:{auth_token}".encode()).decode(),
        "Content-Type": "application/x-www-form-urlencoded",
        "Accept": "application/json",
    }
    client = HttpClient(timeout=timeout, connect_timeout=min(timeout, 2.0), pool_size=1)
    try:
        answer = client.post(url, time.monotonic() + timeout, body=urlencode({"Status": "completed"}).encode(),
                             headers=headers)  # fmt: skip
    except HttpFailure as failure:
        return CallEnd(False, failure.result.detail or failure.result.error_class or "no answer")
    finally:
        client.close()
    if 200 <= answer.status < 300:
        return CallEnd(True, "ended")
    code = _code(answer.body)
    if code == CALL_NOT_IN_PROGRESS:
        return CallEnd(True, "already over")
    return CallEnd(
        False, f"twilio {answer.status}{f' code {code}' if code else ''}: {scrub(_message(answer.body), 160)}"
    )


def _code(body: bytes) -> int | None:
    value = twilio_error(body).get("code")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _message(body: bytes) -> str:
    return str(twilio_error(body).get("message") or "")
