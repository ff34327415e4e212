"""Cloud Functions (2nd gen) entry points: parse, call the domain library, respond.

Each deployment picks its target with --entry-point; every target lives in this one file.
"""
from __future__ import annotations

import flask
import functions_framework
from pydantic import ValidationError

from signup_verification import problems, verifications
from signup_verification.api_models import CreateVerificationRequest, field_errors, valid_idempotency_key
from signup_verification.runtime import get_runtime
from signup_verification.web import endpoint, json_body, json_response, require_method


@functions_framework.http
@endpoint
def create_verification(request: flask.Request):
    """POST {account_id, channel, destination, locale?, template?} with an Idempotency-Key header."""
    require_method(request, "POST")
    key = request.headers.get("Idempotency-Key")
    if not valid_idempotency_key(key):
        raise problems.bad_request(
            "The Idempotency-Key header is required: 1-255 printable ASCII characters.",
            [{"pointer": "header/Idempotency-Key", "detail": "missing or invalid"}])
    runtime = get_runtime()
    body = json_body(request, runtime.settings.max_body_bytes)
    try:
        payload = CreateVerificationRequest.model_validate(body)
    except ValidationError as exc:
        raise problems.bad_request("The body failed validation.", field_errors(exc)) from None
    result = verifications.create_verification(runtime.db, runtime.settings, runtime.keyring, payload, key)
    return json_response(result.body, result.status, result.headers)
