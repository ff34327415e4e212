"""The dispatch target's edge: `POST` drains eligible intents until none is left or the time budget
is spent (operations/dispatch_run.py), and answers its report: {claimed, accepted, retryable,
failed, ambiguous, suppressed, released, stale_writes, batches, elapsed_ms}.

Cloud Scheduler's POST (body `{}`, or none) is a scheduled invocation: it may start more
(delivery/fanout.py). A fan-out task's POST carries `{"fanout": {"slot": "<its reservation>"}}`:
that invocation claims like any other, starts none, and does not wait idle. Both callers are
checked the same way (IAM and the identity check: ALLOWED_INVOKERS)."""

from __future__ import annotations

import json

import flask

from ..delivery.fanout import Invocation
from ..operations import dispatch_run
from ..platform import shutdown
from . import problems
from .http import Incoming, Response, endpoint, json_response, require_method
from .services import Services, accept

MAX_SLOT = 200


@endpoint
def handle(request: flask.Request, services: Services) -> Response:
    incoming = accept(request, services, "dispatch")
    require_method(incoming, "POST")
    invocation = invocation_of(incoming)
    config = services.config
    report = dispatch_run.run(
        services.db,
        config.dispatch,
        config.retry,
        config.signals,
        services.keyring,
        services.channels,
        stop=shutdown.STOP,
        close_channels=services.close_channels,
        invocation=invocation,
    )
    return json_response(report.as_dict())


def invocation_of(request: Incoming) -> Invocation:
    """Scheduled (no body, or a JSON object without `fanout`), or fan-out; anything else is a 400."""
    if not request.body.strip():
        return Invocation()
    try:
        body = json.loads(request.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise problems.bad_request("The body is not valid UTF-8 JSON.") from None
    if not isinstance(body, dict):
        raise problems.bad_request("The body must be a JSON object.")
    fanned = body.get("fanout")
    if fanned is None:
        return Invocation()
    slot = fanned.get("slot") if isinstance(fanned, dict) else None
    if not isinstance(slot, str) or not 0 < len(slot) <= MAX_SLOT or not slot.isprintable():
        raise problems.bad_request(
            "fanout.slot must be the reservation's id.", [{"pointer": "#/fanout/slot", "detail": "a short string"}]
        )
    return Invocation.fanned_out(slot)
