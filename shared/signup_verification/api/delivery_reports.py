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
"""

from __future__ import annotations

import logging
import time

import flask

from ..delivery import reports
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
    # The URL Twilio signed is the StatusCallback we sent (no query string), never the Host header.
    url = config.status_callback
    if params is None or not signatures.twilio_valid(config.twilio_auth_token, url, params, signature):
        raise _forged("The signature does not match the URL and parameters.")
    try:
        observation = reports.twilio_observation(dict(params))
    except reports.MalformedReport as exc:
        raise bad_request(str(exc)) from None
    return reports.ingest(db, "twilio", [observation], config.failures)


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
