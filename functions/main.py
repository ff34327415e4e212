"""Cloud Functions (2nd gen) entry points: parse, call the domain library, respond.

Each deployment picks its target with --entry-point; every target lives in this one file.
"""

from __future__ import annotations

import importlib

import flask
import functions_framework

from signup_verification.api import auth, edge, replay
from signup_verification.api.http import (
    Incoming,
    endpoint,
    json_body,
    json_response,
    read_request,
    require_method,
    single_header,
)
from signup_verification.platform import logs as service_logging
from signup_verification.platform import shutdown
from signup_verification.runtime import Runtime, get_runtime

# Each target imports its own modules inside its body (a deployment serves one target: the others'
# edges, the reconciler, the dispatcher, cryptography never load there; issue 18). The instance's
# own target's modules are imported here, at start-up, so its first request does not pay for them.
TARGET_MODULES = {
    "create_verification": (
        "pydantic",
        "signup_verification.api.create",
        "signup_verification.api.models",
        "signup_verification.api.problems",
        "signup_verification.api.read",
        "signup_verification.api.return_url",
    ),
    "confirm_verification": (
        "signup_verification.api.confirm",
        "signup_verification.api.pages",
        "signup_verification.verifications.confirm",
    ),
    "dispatch": ("signup_verification.delivery.dispatcher",),
    "reconcile": ("signup_verification.operations.reconciler.runner",),
    "status": ("signup_verification.operations.signals",),
    "delivery_reports": (
        "cryptography.hazmat.primitives.asymmetric.ec",
        "signup_verification.api.delivery_reports",
        "signup_verification.api.report_signatures",
        "signup_verification.delivery.reports",
    ),
}

# The configuration is read (and checked, every setting at once) at import: a bad one fails the start.
_startup = get_runtime().config
# JSON lines with trace ids on Cloud Run, readable text locally; redacted. Deferred: google-cloud-logging
# is imported after the first answer went out (platform/log_handoff.py; records are held until then).
service_logging.configure(_startup.logging, defer=True)

for _module in TARGET_MODULES.get(_startup.function_target or "", ()):
    importlib.import_module(_module)

# SIGTERM -> shutdown.STOP: dispatch stops claiming, lets in-flight sends finish, releases the rest.
shutdown.install(exit_after=_startup.shutdown.grace_seconds)

# functions-framework runs this module inside its Flask app's context: limits and reserved paths there.
if flask.has_app_context():
    # delivery_reports takes provider batches (SendGrid posts up to ~1,000 events at once): its own limit
    _max_body = (
        _startup.reports.max_body_bytes
        if _startup.function_target == "delivery_reports"
        else _startup.http.max_body_bytes
    )
    edge.configure(flask.current_app._get_current_object(), _max_body)  # type: ignore[attr-defined]
    edge.after_first_response(flask.current_app._get_current_object(), service_logging.first_response_sent)  # type: ignore[attr-defined]


def _incoming(request: flask.Request, runtime: Runtime, target: str) -> Incoming:
    """The request read once (body within the limit), its caller checked: production needs a
    platform identity or a signed request for every target but confirm (docs/security.md)."""
    incoming = read_request(request, runtime.config.http.max_body_bytes)
    auth.authorize(runtime.auth, target, incoming, replay.first_use(runtime.db))
    return incoming


@functions_framework.http
@endpoint
def create_verification(request: flask.Request):
    """POST {account_id, channel, destination, locale?, template?, return_url?} with an Idempotency-Key
    header; GET /<verification_id> reads one (issue 12), with the same caller requirements."""
    from pydantic import ValidationError

    from signup_verification.api import create as create_edge
    from signup_verification.api import problems, return_url
    from signup_verification.api import read as read_edge
    from signup_verification.api.models import CreateVerificationRequest, field_errors, valid_idempotency_key

    runtime = get_runtime()
    incoming = _incoming(request, runtime, "create_verification")
    if request.path.strip("/"):  # /<verification_id>: the read API
        require_method(incoming, "GET", "HEAD")
        return read_edge.read_answer(runtime.db, request.path)
    require_method(incoming, "POST")
    key = single_header(incoming, "Idempotency-Key")
    if not valid_idempotency_key(key):
        raise problems.bad_request(
            "The Idempotency-Key header is required: 1-255 printable ASCII characters.",
            [{"pointer": "header/Idempotency-Key", "detail": "missing or invalid"}],
        )
    body = json_body(incoming)
    try:
        payload = CreateVerificationRequest.model_validate(body)
    except ValidationError as exc:
        raise problems.bad_request("The body failed validation.", field_errors(exc)) from None
    return_url.require_allowed(payload.return_url, runtime.config.return_url)
    answer = create_edge.create_verification(runtime.db, runtime.config.create, runtime.keyring, payload, key)
    return json_response(answer.body, answer.status, answer.headers)


@functions_framework.http
@endpoint
def confirm_verification(request: flask.Request):
    """GET ?token= shows the Confirm page and changes nothing (link scanners fetch links).
    POST consumes once: the page's form -> a page; JSON {token} or {verification_id, code} -> JSON."""
    from signup_verification.api import confirm as confirm_edge
    from signup_verification.api import pages
    from signup_verification.verifications import confirm as confirmations

    runtime = get_runtime()
    incoming = _incoming(request, runtime, "confirm_verification")
    require_method(incoming, "GET", "HEAD", "POST")
    config = runtime.config.confirm
    if incoming.method != "POST":
        token = incoming.args.get("token")
        return pages.guarded(
            lambda: confirm_edge.page_answer(
                confirmations.preview_link(runtime.db, runtime.keyring, token), incoming, token, config.product_name
            ),
            incoming,
            token,
        )
    if incoming.mimetype == "application/json":
        kind, value = confirm_edge.parse_json_request(json_body(incoming), config.code_digits)
        if kind == "link":
            outcome = confirmations.confirm_link(runtime.db, runtime.keyring, value)
        else:
            verification_id, code = value
            outcome = confirmations.confirm_code(
                runtime.db, runtime.keyring, verification_id, code, failures_per_day=config.destination_failures_per_day
            )
        return confirm_edge.json_answer(outcome)
    form_token = pages.form_token(incoming)
    return pages.guarded(
        lambda: confirm_edge.page_answer(
            confirmations.confirm_link(runtime.db, runtime.keyring, form_token), incoming, product=config.product_name
        ),
        incoming,
        form_token,
    )


@functions_framework.http
@endpoint
def dispatch(request: flask.Request):
    """POST (Cloud Scheduler): drain eligible intents until none is left or the time budget is spent.
    Answers {claimed, accepted, retryable, failed, ambiguous, suppressed, released, stale_writes, batches, elapsed_ms}."""
    runtime = get_runtime()
    require_method(_incoming(request, runtime, "dispatch"), "POST")
    report = runtime.dispatch(shutdown.STOP)  # its signal records too; after SIGTERM its adapters are closed
    return json_response(report.as_dict())


@functions_framework.http
@endpoint
def reconcile(request: flask.Request):
    """POST (Cloud Scheduler): one bounded sweep through the outbox transitions; never sends.
    Answers {moves, overdue, drained, duties, watermark, elapsed_ms}, or {skipped} if a run is in progress."""
    from signup_verification.operations import reconciler

    runtime = get_runtime()
    require_method(_incoming(request, runtime, "reconcile"), "POST")
    report = reconciler.reconcile(runtime.db, runtime.config.reconciler, signals_config=runtime.config.signals)
    return json_response(report.as_json())


@functions_framework.http
@endpoint
def status(request: flask.Request):
    """GET: the operator signals per channel, the heartbeats and the alerts they would raise (JSON)."""
    from signup_verification.operations import signals

    runtime = get_runtime()
    require_method(_incoming(request, runtime, "status"), "GET", "HEAD")
    snapshot = signals.compute(runtime.db, runtime.config.deployment, runtime.config.signals, with_workers=True)
    return json_response(snapshot.as_json(), headers={"Cache-Control": "no-store"})


@functions_framework.http
@endpoint
def delivery_reports(request: flask.Request):
    """POST /sendgrid (Signed Event Webhook batch) and POST /twilio (status callback), issue 13.
    Public like confirm: the providers' signatures are the guard (api/delivery_reports.py).
    Answers {received, stored, duplicates, unknown, delivered, undeliverable, suppressed, ignored}."""
    from signup_verification.api import delivery_reports as reports_edge

    runtime = get_runtime()
    incoming = read_request(request, runtime.config.reports.max_body_bytes)
    return reports_edge.handle(runtime.db, runtime.config.reports, incoming, request.path)
