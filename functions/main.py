"""Cloud Functions (2nd gen) entry points: each target is one call into its edge module.

Each deployment picks its target with --entry-point; every target lives in this one file. An edge
module (shared/signup_verification/api/) parses the request, checks its caller, calls the domain
and renders the answer; `EDGES` names the one module each target calls, and the instance's own
target's module is imported at start-up, so its first request does not pay for it (the others'
edges, the dispatcher, cryptography never load there: tests/integration/test_function_startup.py).
"""

from __future__ import annotations

import importlib

import flask
import functions_framework

from signup_verification.api import edge
from signup_verification.platform import logs as service_logging
from signup_verification.platform import serving, shutdown
from signup_verification.platform.config import Target
from signup_verification.platform.errors import ConfigError
from signup_verification.runtime import get_runtime

EDGES = {
    Target.CREATE: "signup_verification.api.create",
    Target.CONFIRM: "signup_verification.api.confirm",
    Target.DISPATCH: "signup_verification.api.dispatch",
    Target.RECONCILE: "signup_verification.api.reconcile",
    Target.STATUS: "signup_verification.api.status",
    Target.DELIVERY_REPORTS: "signup_verification.api.delivery_reports",
}

# The configuration is read (and checked, every setting at once, FUNCTION_TARGET among them: one of
# Target's names) at import: a bad one fails the start with one line naming each problem.
try:
    _startup = get_runtime().config
except ConfigError as refused:
    raise SystemExit(f"signup-verification: {refused}") from None
# JSON lines with trace ids on Cloud Run, readable text locally; redacted. Deferred: google-cloud-logging
# is imported after the first answer went out (platform/log_handoff.py; records are held until then).
service_logging.configure(_startup.logging, defer=True)
if _startup.function_target in EDGES:
    importlib.import_module(EDGES[_startup.function_target])
# SIGTERM -> shutdown.STOP: dispatch stops claiming, lets in-flight sends finish, releases the rest.
shutdown.install(exit_after=_startup.shutdown.grace_seconds)
# functions-framework builds its gunicorn server after importing this module: with the request-line
# and header limits, the read deadline and no control socket (platform/serving.py), in the image as
# on a laptop.
serving.install(_startup.http.read_timeout_seconds)

# functions-framework runs this module inside its Flask app's context: limits and reserved paths there.
if flask.has_app_context():
    _app = flask.current_app._get_current_object()  # type: ignore[attr-defined]
    edge.configure(_app, edge.body_limit(_startup.function_target, _startup.http, _startup.reports))
    edge.after_first_response(_app, service_logging.first_response_sent)


def _serve(target: Target, request: flask.Request) -> flask.typing.ResponseReturnValue:
    return importlib.import_module(EDGES[target]).handle(request, get_runtime())


@functions_framework.http
def create_verification(request: flask.Request) -> flask.typing.ResponseReturnValue:
    """POST {account_id, channel, destination, locale?, template?, return_url?, fallback?} (or
    {account_id, steps, ...}) with an Idempotency-Key header creates (or replays); GET
    /<verification_id> reads one."""
    return _serve(Target.CREATE, request)


@functions_framework.http
def confirm_verification(request: flask.Request) -> flask.typing.ResponseReturnValue:
    """GET ?token= shows the Confirm page; POST consumes once (the page's form, or JSON {token} or
    {verification_id, code})."""
    return _serve(Target.CONFIRM, request)


@functions_framework.http
def dispatch(request: flask.Request) -> flask.typing.ResponseReturnValue:
    """POST (Cloud Scheduler): drain eligible intents until none is left or the time budget is spent."""
    return _serve(Target.DISPATCH, request)


@functions_framework.http
def reconcile(request: flask.Request) -> flask.typing.ResponseReturnValue:
    """POST (Cloud Scheduler): one bounded sweep through the outbox transitions; never sends."""
    return _serve(Target.RECONCILE, request)


@functions_framework.http
def status(request: flask.Request) -> flask.typing.ResponseReturnValue:
    """GET: the operator signals per channel, the heartbeats and the alerts they would raise."""
    return _serve(Target.STATUS, request)


@functions_framework.http
def delivery_reports(request: flask.Request) -> flask.typing.ResponseReturnValue:
    """POST /sendgrid (Signed Event Webhook batch) and POST /twilio (status callback)."""
    return _serve(Target.DELIVERY_REPORTS, request)
