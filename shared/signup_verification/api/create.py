"""The create_verification target's edge: `POST /` creates (or replays) a verification, `GET
/<verification_id>` reads one (api/read.py), both with the same caller requirements.

Validation has one home per kind: the request's syntax is the edge model's (api/models.py: types,
unknown fields, normalised destinations, the Idempotency-Key's shape); the policy is the domain's
(verifications/create.py: the fallback's timing, the SMS destination policy, the return URL's
allowed origins); the limits are SQL's (create_verification). A validated request becomes a
`NewVerification` (the template catalogue is resolved here, above the domain), and each create
outcome is rendered here, once. Replays are rendered from the stored outcome by the same code as
the first answer, so they are byte-identical to it (plus `Idempotent-Replayed: true`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, assert_never

import flask
from pydantic import ValidationError

from ..delivery import templates
from ..platform.config import Target
from ..platform.database import Database
from ..verifications import create as domain
from ..verifications.channel_policy import Fallback
from ..verifications.config import CreateConfig
from ..verifications.tokens import Keyring
from . import read, return_url
from .config import ReturnUrlConfig
from .http import Response, endpoint, json_body, json_response, require_method, single_header
from .models import CreateVerificationRequest, FallbackRequest, StepRequest, field_errors, valid_idempotency_key
from .problems import Problem, bad_request
from .services import Services, accept


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


@endpoint
def handle(request: flask.Request, services: Services) -> Response:
    incoming = accept(request, services, Target.CREATE)
    if request.path.strip("/"):  # /<verification_id>: the read API
        require_method(incoming, "GET", "HEAD")
        return read.read_answer(services.db, services.keyring, services.config.create.link_base, request.path)
    require_method(incoming, "POST")
    key = single_header(incoming, "Idempotency-Key")
    if not valid_idempotency_key(key):
        raise bad_request(
            "The Idempotency-Key header is required: 1-255 printable ASCII characters.",
            [{"pointer": "header/Idempotency-Key", "detail": "missing or invalid"}],
        )
    try:
        payload = CreateVerificationRequest.model_validate(json_body(incoming))
    except ValidationError as exc:
        raise bad_request("The body failed validation.", field_errors(exc)) from None
    config = services.config
    answered = create_verification(services.db, config.create, services.keyring, payload, key, config.return_url)
    return json_response(answered.body, answered.status, answered.headers)


def fingerprint(request: CreateVerificationRequest) -> bytes:
    """What makes two requests 'the same' for an idempotency key: the normalised payload. `steps`
    stays out: the model holds the same steps in channel, destination and fallback, so steps and
    the fallback shorthand that say the same thing are the same request; a third step is `step3`."""
    payload = request.model_dump(exclude={"steps"})
    if request.step3 is not None:  # only steps has one: absent, the payload is the one it always was
        payload["step3"] = request.step3.model_dump()
    if payload.get("fallback") is None:
        # absent optional fields stay out of the fingerprint: a request without them matches the keys stored
        # for requests that never had them
        payload.pop("fallback", None)
    if payload.get("return_url") is None:
        payload.pop("return_url", None)
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).digest()


def new_verification(request: CreateVerificationRequest) -> domain.NewVerification:
    version = templates.current_version(request.template)
    return domain.NewVerification(
        account_id=request.account_id,
        channel=request.channel,
        destination=request.destination,
        purpose=request.template,
        locale=templates.resolve_locale(version, request.locale),
        template_version=version,
        fingerprint=fingerprint(request),
        client_ip=request.client_ip,
        fallback=_later_step(request.fallback),
        step3=_later_step(request.step3),
        return_url=request.return_url,
    )


def _later_step(step: FallbackRequest | StepRequest | None) -> Fallback | None:
    return Fallback(step.channel, step.destination, step.after_seconds) if step is not None else None


def _verification_body(v: domain.Verification) -> dict[str, Any]:
    # This key order is the one the answers always had (PostgreSQL's jsonb order): keep it.
    body: dict[str, Any] = {
        "status": v.status,
        "channel": v.channel,
        "account_id": v.account_id,
        "created_at": v.created_at,
        "expires_at": v.expires_at,
        "verification_id": v.verification_id,
    }
    if v.fallback is not None:  # only when asked for
        body["fallback"] = {k: v.fallback[k] for k in ("channel", "after_seconds", "policy")}
    if v.steps is not None:  # only with a third step
        body["steps"] = [{k: step[k] for k in ("channel", "after_seconds")} for step in v.steps]
    if v.code_entry_url is not None:  # only when an SMS is among the channels
        body["code_entry_url"] = v.code_entry_url
    return body


def answer(outcome: domain.CreateOutcome) -> Answer:
    """The one HTTP rendering of each create outcome; raises the Problem for a refusal."""
    match outcome:
        case domain.Created():
            return Answer(201, _verification_body(outcome.verification))
        case domain.Replayed():
            return Answer(201, _verification_body(outcome.verification), {"Idempotent-Replayed": "true"})
        case domain.KeyReused():
            raise Problem(
                422,
                "idempotency-key-reused",
                "Idempotency-Key reused with a different request",
                "This Idempotency-Key was already used with another payload; use a new key.",
            )
        case domain.Refused():
            raise Problem(
                422,
                outcome.slug,
                outcome.title,
                outcome.detail,
                [{"pointer": outcome.pointer, "detail": outcome.field_detail}],
            )
        case domain.Suppressed():
            raise Problem(
                422,
                "destination-suppressed",
                "This destination cannot receive messages",
                "A message to this destination failed for good for a reason of the destination (a hard "
                "bounce, an invalid or unsubscribed number). Use another destination, or ask the operator "
                "to clear it.",
                [{"pointer": outcome.pointer, "detail": "suppressed after a delivery failed for good"}],
            )
        case domain.Invalid():
            raise bad_request("The body failed validation.", [{"pointer": outcome.pointer, "detail": outcome.detail}])
        case domain.RateLimited():
            raise Problem(
                429,
                "rate-limited",
                "Too many verifications for this destination",
                f"Retry after {outcome.retry_after} seconds.",
                headers={"Retry-After": str(outcome.retry_after)},
            )
        case _:
            assert_never(outcome)


def create_verification(
    db: Database,
    config: CreateConfig,
    keyring: Keyring,
    request: CreateVerificationRequest,
    idempotency_key: str,
    return_urls: ReturnUrlConfig | None = None,
) -> Answer:
    """Create (or replay) and render: what the endpoint, the tests' factories and the tools call.
    `return_urls`: the allowed origins (None: the request carries no return_url to check)."""
    if return_urls is not None:
        return_url.require_allowed(request.return_url, return_urls)
    try:
        return answer(domain.create(db, config, keyring, new_verification(request), idempotency_key))
    except Problem as problem:
        if request.steps is not None:  # point into the shape the caller sent
            problem.errors = [e | {"pointer": _step_pointer(e["pointer"])} for e in problem.errors]
        raise


# The domain names the first two steps as the verification's channel and its fallback.
_STEP_POINTERS = {"#/destination": "#/steps/0/destination", "#/channel": "#/steps/0/channel"}


def _step_pointer(pointer: str) -> str:
    if pointer.startswith("#/fallback/"):
        return "#/steps/1/" + pointer.removeprefix("#/fallback/")
    return _STEP_POINTERS.get(pointer, pointer)
