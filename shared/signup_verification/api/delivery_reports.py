"""The public `delivery_reports` target: `POST /sendgrid` and `POST /twilio`.

No caller identity (the providers cannot present one): each path checks its provider's signature
over the raw request before anything is parsed or stored (api/report_signatures.py). Missing
signature: 401; wrong or stale one: 403; a path whose provider is not configured: 403; nothing is
stored for any of them. A signed body that is not what the provider sends at all: 400. A signed
batch is stored whatever one event of it holds: an event that cannot be read is skipped and counted
as `malformed` (2xx, so the provider does not retry the batch forever). Reports about messages we
do not know are answered 200 (so the provider stops retrying), counted and logged. A report of a
channel-wide sender or account fault (an exhausted quota, an unregistered sender) logs an ERROR
with `alert`: it pages, as a refused credential does.

Twilio's reports all come to `/twilio`: an SMS's or a WhatsApp message's status callback
(MessageSid), a call's status callback (CallSid, CallStatus) and its answering machine detection
result (CallSid, AnsweredBy), each checked with the one X-Twilio-Signature check. A detection result
of a machine on a call of ours, new, ends the call (delivery/call_control.py) once it is stored.
"""

from __future__ import annotations

import logging
import time

import flask

from ..delivery import call_control, reports
from ..platform.database import Database
from . import report_signatures as signatures
from .config import DeliveryReportsConfig
from .http import Incoming, Response, endpoint, json_response, read_request, single_header
from .problems import Problem, bad_request, method_not_allowed
from .services import Services

_log = logging.getLogger("signup_verification.api.delivery_reports")

SENDGRID_SIGNATURE = "X-Twilio-Email-Event-Webhook-Signature"
SENDGRID_TIMESTAMP = "X-Twilio-Email-Event-Webhook-Timestamp"
TWILIO_SIGNATURE = "X-Twilio-Signature"


@endpoint
def handle(request: flask.Request, services: Services) -> Response:
    """Public like confirm: no caller identity, the providers' signatures are the guard. Its body
    limit is its own (SendGrid posts up to ~1,000 events at once)."""
    config = services.config.reports
    return answer(services.db, config, read_request(request, config.max_body_bytes), request.path)


def answer(db: Database, config: DeliveryReportsConfig, incoming: Incoming, path: str) -> Response:
    route = path.rstrip("/").rsplit("/", 1)[-1]
    if route not in ("sendgrid", "twilio"):
        raise Problem(404, "not-found", "Not found", "POST to /sendgrid or /twilio.")
    if incoming.method != "POST":
        raise method_not_allowed("POST")
    if route == "sendgrid":
        result = _sendgrid(db, config, incoming)
    else:
        result = _twilio(db, config, incoming)
    _logged(route, result)
    return json_response(result.as_dict())


def _sendgrid(db: Database, config: DeliveryReportsConfig, incoming: Incoming) -> reports.IngestResult:
    if config.sendgrid_key is None:
        raise _not_configured("sendgrid", "SENDGRID_WEBHOOK_PUBLIC_KEY")
    signature = single_header(incoming, SENDGRID_SIGNATURE)
    timestamp = single_header(incoming, SENDGRID_TIMESTAMP)
    if not signature or not timestamp:
        raise _unsigned(f"{SENDGRID_SIGNATURE} and {SENDGRID_TIMESTAMP}")
    if not signatures.sendgrid_fresh(timestamp, time.time(), config.tolerance_seconds):
        raise _forged("The timestamp is outside the accepted window.")
    if not signatures.sendgrid_valid(config.sendgrid_key, signature, timestamp, incoming.body):
        raise _forged("The signature does not match the body.")
    try:
        batch = reports.sendgrid_events(incoming.body, config.email_provider)
    except reports.MalformedReport as exc:
        raise bad_request(str(exc)) from None
    return reports.ingest(db, "sendgrid", batch.observations, config.failures, batch.ignored, batch.malformed)


def _twilio(db: Database, config: DeliveryReportsConfig, incoming: Incoming) -> reports.IngestResult:
    if config.twilio_auth_token is None or config.status_callback is None:
        raise _not_configured("twilio", "TWILIO_AUTH_TOKEN and DELIVERY_REPORTS_URL")
    signature = single_header(incoming, TWILIO_SIGNATURE)
    if not signature:
        raise _unsigned(TWILIO_SIGNATURE)
    # As Flask would hand it to twilio-python's RequestValidator; None: unsignable as sent (refused below)
    params = signatures.twilio_form(incoming.body, incoming.mimetype)
    # The URL Twilio signed is the StatusCallback we sent, never the Host header: with the query that
    # names the message's attempt, as received (Twilio signs the URL through its query string); a
    # message sent before the URL named one is signed without it. A changed query fails the signature.
    url = config.status_callback.split("?", 1)[0] + "?" + incoming.query if incoming.query else config.status_callback
    if params is None or not signatures.twilio_valid(config.twilio_auth_token, url, params, signature):
        raise _forged("The signature does not match the URL and parameters.")
    try:
        observation = reports.callback_attempt(reports.twilio_observation(dict(params)), incoming.query)
    except reports.MalformedReport as exc:  # signed, so Twilio's: counted in the log, never stored
        _log.warning("a signed Twilio report could not be read: %s", exc,
                     extra={"json_fields": {"event": "delivery_reports", "provider": "twilio", "malformed": 1}})  # fmt: skip
        raise bad_request(str(exc)) from None
    result = reports.ingest(db, "twilio", [observation], config.failures)  # committed before the call is ended
    call = reports.ends_call(observation)
    if call is not None and result.stored:  # a machine answered a call of ours: reported once, ended once
        _end_call(config, call)
    return result


def _end_call(config: DeliveryReportsConfig, call_sid: str) -> None:
    """Hang up a call a machine answered (delivery/call_control.py): bounded, and its failure only logged
    (the report is stored; the call ends at its time limit)."""
    if config.twilio_account_sid is None or config.twilio_auth_token is None:
        ended = call_control.CallEnd(False, "TWILIO_ACCOUNT_SID is not set")
    else:
        ended = call_control.end_call(config.twilio_account_sid, config.twilio_auth_token, config.twilio_api_url,
                                      call_sid)  # fmt: skip
    fields = {"event": "call_ended", "call": call_sid, "over": ended.over, "detail": ended.detail}
    if ended.over:
        _log.info("call %s answered by a machine: %s", call_sid, ended.detail, extra={"json_fields": fields})
    else:
        _log.warning("call %s answered by a machine could not be ended (%s): it runs to its time limit",
                     call_sid, ended.detail, extra={"json_fields": fields})  # fmt: skip


def _unsigned(headers: str) -> Problem:
    return Problem(401, "report-unsigned", "The report is not signed", f"Send {headers}.")


def _forged(detail: str) -> Problem:
    return Problem(403, "report-signature-invalid", "The report's signature is not valid", detail)


def _not_configured(provider: str, settings: str) -> Problem:
    _log.warning("a %s report arrived but %s is not configured: refused", provider, settings)
    return Problem(403, "reports-not-configured", "Reports from this provider are not accepted", None)


def _logged(provider: str, result: reports.IngestResult) -> None:
    fields: dict[str, object] = {"event": "delivery_reports", "provider": provider, **result.as_dict()}
    if result.sender_faults:
        fields["alert"] = "sender_or_account"
        _log.error(
            "%s reported %d failure(s) of our sender or account%s: no destination suppressed; see `verifyctl status`",
            provider, result.sender_faults, ", the channel is held" if result.held else "",
            extra={"json_fields": fields},
        )  # fmt: skip
        return
    level = logging.WARNING if result.unknown or result.malformed else logging.INFO
    _log.log(level, "delivery reports from %s: %d stored, %d unknown, %d malformed", provider, result.stored,
             result.unknown, result.malformed, extra={"json_fields": fields})  # fmt: skip
