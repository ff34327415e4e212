"""The dispatch target's edge: `POST` drains eligible intents until none is left or the time budget
is spent (operations/dispatcher.py), and answers its report: {claimed, accepted, retryable,
failed, undeliverable, ambiguous, suppressed, released, stale_writes, batches, elapsed_ms}.

Three paths, told apart by the body, each with its own caller:
- scheduled: Cloud Scheduler's POST (body `{}`, or none). It may start more (delivery/fanout.py).
  In production only the identities of ALLOWED_INVOKERS (the scheduler's) are accepted here, never
  the fan-out's nor the nudge's (config/checks.py refuses to start otherwise).
- nudge: a create's named task (outbox/nudge.py), body `{"nudge": {"bucket": <n>}}`. Only the nudge
  identity (DISPATCH_NUDGE_SERVICE_ACCOUNT) is accepted here. It drains like a scheduled invocation
  (it may fan out) but never waits idle, and on an empty outbox it answers its empty report after one
  probe, having written nothing: a forged, late or repeated nudge costs one read.
- fan-out: a task's POST carrying `{"fanout": {"slot": "<its reservation>"}}`. Only the fan-out
  identity (DISPATCH_FANOUT_SERVICE_ACCOUNT, whose OIDC token the tasks carry) is accepted here. The
  invocation runs only if it claims that slot (reserved, live, never claimed); a made-up, replayed or
  lapsed slot runs nothing and answers so with a 2xx problem (`fanout-slot-not-claimed`): Cloud Tasks
  retries every other answer, and such a task can never run. A claimed one starts none and does not
  wait idle.
Signed requests (REQUEST_SIGNING_KEYS, SIGNED_TARGETS) are accepted on both paths."""

from __future__ import annotations

import json

import flask

from ..delivery.fanout import FANOUT, NUDGE, SCHEDULED, Invocation, SlotNotClaimed
from ..operations.dispatcher import DispatchRun, dispatch
from ..platform import shutdown
from ..platform.config import Target
from . import auth, problems
from .http import Incoming, Response, endpoint, json_response, read_request, require_method
from .services import EdgeConfig, Services

MAX_SLOT = 200


@endpoint
def handle(request: flask.Request, services: Services) -> Response:
    config = services.config
    incoming = read_request(request, config.http.max_body_bytes)
    invocation = invocation_of(incoming)
    auth.authorize(config.auth, Target.DISPATCH, incoming, auth.first_use(services.db), invokers(config, invocation))
    require_method(incoming, "POST")
    try:
        report = dispatch(
            DispatchRun(
                services.db,
                config.dispatch,
                services.keyring,
                services.channels,
                stop=shutdown.STOP,
                invocation=invocation,
                close_channels=services.close_channels,
            )
        )
    except SlotNotClaimed as refused:
        return not_claimed(refused).response()
    return json_response(report.as_dict())


def invokers(config: EdgeConfig, invocation: Invocation) -> frozenset[str] | None:
    """The identities this path accepts: the fan-out's alone on the fan-out path, the nudge's alone on
    the nudge path (none when that path has no identity), ALLOWED_INVOKERS on the scheduled one."""
    if invocation.role == SCHEDULED:
        return None
    identity = {FANOUT: config.dispatch.fanout.service_account, NUDGE: config.dispatch.nudge.service_account}[
        invocation.role
    ]
    return frozenset({identity.lower()}) if identity else frozenset()


def not_claimed(refused: SlotNotClaimed) -> problems.Problem:
    """2xx, so Cloud Tasks does not retry what can never run; a problem, so nobody reads it as a run."""
    return problems.Problem(
        200,
        "fanout-slot-not-claimed",
        "This fan-out slot was not claimed: nothing ran",
        {
            "claimed": "Another invocation claimed this slot already (a replayed or repeated task).",
            "expired": "The slot's reservation lapsed before this task arrived.",
        }.get(refused.was, "No such slot is reserved for this deployment (made up, or its invocation ended)."),
        extensions={"slot_was": refused.was},
    )


def invocation_of(request: Incoming) -> Invocation:
    """Scheduled (no body, or a JSON object with neither `fanout` nor `nudge`), nudged, or fan-out;
    anything else is a 400."""
    if not request.body.strip():
        return Invocation()
    try:
        body = json.loads(request.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise problems.bad_request("The body is not valid UTF-8 JSON.") from None
    if not isinstance(body, dict):
        raise problems.bad_request("The body must be a JSON object.")
    if "nudge" in body and "fanout" not in body:
        if not isinstance(body["nudge"], dict):
            raise problems.bad_request("nudge must be an object.", [{"pointer": "#/nudge", "detail": "an object"}])
        return Invocation.nudged()
    fanned = body.get("fanout")
    if fanned is None:
        return Invocation()
    slot = fanned.get("slot") if isinstance(fanned, dict) else None
    if not isinstance(slot, str) or not 0 < len(slot) <= MAX_SLOT or not slot.isprintable():
        raise problems.bad_request(
            "fanout.slot must be the reservation's id.", [{"pointer": "#/fanout/slot", "detail": "a short string"}]
        )
    return Invocation.fanned_out(slot)
