"""The confirm_verification target's edge: `GET ?token=` shows the Confirm page and changes nothing
(link scanners fetch links); `GET ?entry=` shows the hosted code-entry page (`code_entry_url`);
`POST` proves once: the pages' forms answer a page, JSON `{token}` or `{verification_id, code}`
answers JSON. ONE rendering per confirm outcome gives both answers, the JSON/problem+json one (API
callers) and the HTML page (people).

Dead verifications answer 410 Gone: nothing the caller sends can revive them, only a new
verification helps. A link's page says which way it ended; a code attempt by the API that can no
longer prove hears one answer, 410 `verification-finished` (the read API tells the site which), so
codes cannot probe the state by verification id. The code-entry page, which only its handle's holder
can open, says which way it ended, as a link's page does. A wrong code is 422 with the tries left;
an unknown token, id or handle is one generic 404 that says nothing about accounts or destinations.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import flask

from ..platform.config import Target
from ..platform.database import Database
from ..platform.timestamps import rfc3339_or_none
from ..verifications import confirm as confirmations
from ..verifications import entry as entries
from ..verifications.config import ConfirmConfig
from ..verifications.confirm import MalformedCode, Outcome, Result, normalise_code
from ..verifications.tokens import ENTRY_PARAMETER, LINK_PARAMETER, Keyring
from . import pages, problems
from .http import Incoming, Response, endpoint, json_body, json_response, require_method
from .services import Services, accept

NO_STORE = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}


@dataclass(frozen=True)
class Rendering:
    status: int
    page: str  # the template people see
    problem: tuple[str, str, str] | None = None  # (slug, title, detail) for JSON; None: the verified body


_NOT_FOUND = (
    "verification-not-found",
    "This link or code is not valid",
    "Check that the whole link was opened, or ask the site for a new one.",
)
RENDERINGS: dict[Result, Rendering] = {
    Result.PENDING: Rendering(200, "confirm.html", _NOT_FOUND),  # a look-up (GET) only; JSON never consumes to it
    Result.VERIFIED: Rendering(200, "verified.html"),
    Result.ALREADY_VERIFIED: Rendering(200, "already.html"),
    Result.EXPIRED: Rendering(
        410,
        "expired.html",
        ("verification-expired", "This verification has expired", "Ask the site for a new link or code."),
    ),
    Result.SUPERSEDED: Rendering(
        410,
        "superseded.html",
        (
            "verification-superseded",
            "A newer verification replaced this one",
            "Use the most recent link or code that was sent.",
        ),
    ),
    Result.LOCKED: Rendering(
        410,
        "locked.html",
        ("verification-locked", "Too many wrong codes", "This verification is locked. Ask the site for a new code."),
    ),
    Result.FINISHED: Rendering(
        410,
        "invalid.html",
        (
            "verification-finished",
            "This verification can no longer be confirmed",
            "It ended (the site can read how). Ask the site for a new code.",
        ),
    ),
    # Links have no codes, so a page never shows a wrong code; if one did, it says "not valid".
    Result.WRONG_CODE: Rendering(
        422, "invalid.html", ("code-incorrect", "The code is not correct", "Check the code and try again.")
    ),
    Result.INVALID: Rendering(404, "invalid.html", _NOT_FOUND),
}


@endpoint
def handle(request: flask.Request, services: Services) -> Response:
    incoming = accept(request, services, Target.CONFIRM)
    require_method(incoming, "GET", "HEAD", "POST")
    db, keyring, config = services.db, services.keyring, services.config.confirm
    if incoming.method != "POST":
        entry = incoming.args.get(ENTRY_PARAMETER)
        if entry is not None:  # the hosted code-entry page
            return pages.guarded(
                lambda: page_answer(entries.preview_entry(db, keyring, entry), incoming, entry, config, "code"),
                incoming,
                "code",
                entry,
            )
        token = incoming.args.get(LINK_PARAMETER)
        return pages.guarded(
            lambda: page_answer(confirmations.preview_link(db, keyring, token), incoming, token, config),
            incoming,
            "link",
            token,
        )
    if incoming.mimetype == "application/json":
        kind, value = parse_json_request(json_body(incoming), config.code_digits)
        if kind == "link":
            return json_answer(confirmations.confirm_link(db, keyring, value))
        verification_id, code = value
        failures = config.destination_failures_per_day
        return json_answer(confirmations.confirm_code(db, keyring, verification_id, code, failures_per_day=failures))
    form = pages.form_fields(incoming)
    entry = form.get(ENTRY_PARAMETER, incoming.args.get(ENTRY_PARAMETER))
    if entry is not None:
        return pages.guarded(
            lambda: entry_answer(db, keyring, incoming, entry, form.get("code"), config), incoming, "code", entry
        )
    token = form.get(LINK_PARAMETER, incoming.args.get(LINK_PARAMETER))
    return pages.guarded(
        lambda: page_answer(confirmations.confirm_link(db, keyring, token), incoming, token, config),
        incoming,
        "link",
        token,
    )


def entry_answer(
    db: Database, keyring: Keyring, request: Incoming, entry: str, typed: str | None, config: ConfirmConfig
) -> Response:
    """The code-entry form's post: a code of the wrong shape shows the form again, not counted; any
    other one is tried like the API's (the same tries and budgets) and answers with its page."""
    try:
        code = normalise_code(typed or "", config.code_digits)
    except MalformedCode:
        shown = entries.preview_entry(db, keyring, entry)
        if shown.result != Result.PENDING:
            return page_answer(shown, request, entry, config, "code")
        return page_answer(shown, request, entry, config, "code", status=400, error="malformed")
    failures = config.destination_failures_per_day
    outcome = entries.confirm_entry(db, keyring, entry, code, failures_per_day=failures)
    return page_answer(outcome, request, entry, config, "code", error="wrong")


def json_answer(outcome: Outcome) -> Response:
    """200 body for a verified outcome; raises the Problem for every other one. Its fields are the read
    API's: `channel` the primary channel requested, `verified_*` the first proof, `proofs` every proof;
    `proof` is what this request's secret proved, and `already_verified` says it had proved it before."""
    rendering = RENDERINGS[outcome.result]
    if rendering.problem is None:
        proof = outcome.proof
        body = {
            "verification_id": str(outcome.verification_id),
            "account_id": outcome.account_id,
            "channel": outcome.channel,
            "status": "verified",
            "verified_at": rfc3339_or_none(outcome.verified_at),
            "verified_channel": outcome.verified_channel,
            "verified_via": outcome.verified_via,
            "proof": proof.as_json() if proof else None,
            "proofs": [p.as_json() for p in outcome.proofs],
            "already_verified": outcome.result == Result.ALREADY_VERIFIED,
        }
        return json_response(body, rendering.status, dict(NO_STORE))
    slug, title, detail = rendering.problem
    extensions = {"remaining_attempts": outcome.remaining_attempts} if outcome.result == Result.WRONG_CODE else {}
    raise problems.Problem(rendering.status, slug, title, detail, headers=dict(NO_STORE), extensions=extensions)


def page_answer(
    outcome: Outcome,
    request: Incoming,
    value: str | None,
    config: ConfirmConfig,
    kind: str = "link",
    *,
    status: int | None = None,
    error: str | None = None,
) -> Response:
    """The page in the verification's locale; without a verification, the browser's Accept-Language.
    On the code-entry page (`kind` code) the form stays while the code can still prove: a wrong code
    shows it again with the tries left; the try that spends the last one shows the locked page."""
    rendering = RENDERINGS[outcome.result]
    template = rendering.page
    if kind == "code" and outcome.result == Result.PENDING:
        template, error = "code.html", error if error == "malformed" else None
    elif kind == "code" and outcome.result == Result.WRONG_CODE:  # the last try of a verified one: locked
        template, status = ("code.html", status) if outcome.remaining_attempts else ("locked.html", 410)
    else:
        error = None
    locale = pages.choose_locale(outcome.locale, request.headers.get("Accept-Language"))
    return pages.outcome_page(
        template,
        status or rendering.status,
        outcome,
        value,
        config.product_name,
        locale,
        kind=kind,
        error=error,
        digits=config.code_digits,
    )


def parse_json_request(body: dict[str, Any], code_digits: int) -> tuple[str, Any]:
    """`{token}` -> ('link', token); `{verification_id, code}` -> ('code', (uuid, code)); else 400."""
    if set(body) == {"token"}:
        if not isinstance(body["token"], str):
            raise problems.bad_request(
                "token must be a string.", [{"pointer": "#/token", "detail": "must be a string"}]
            )
        return "link", body["token"]
    if set(body) == {"verification_id", "code"}:
        errors = []
        verification_id = body["verification_id"]
        try:
            parsed_id = uuid.UUID(verification_id) if isinstance(verification_id, str) else None
        except ValueError:
            parsed_id = None
        if parsed_id is None:
            errors.append({"pointer": "#/verification_id", "detail": "must be a UUID string"})
        code = body["code"]
        try:
            normalised = normalise_code(code, code_digits) if isinstance(code, str) else None
        except MalformedCode:
            normalised = None
        if normalised is None:
            errors.append({"pointer": "#/code", "detail": f"must be a string of {code_digits} digits"})
        if errors:
            raise problems.bad_request("The body failed validation (not counted as a try).", errors)
        return "code", (parsed_id, normalised)
    raise problems.bad_request(
        'Send {"token": ...} for a link, or {"verification_id": ..., "code": ...}.',
        [{"pointer": "#", "detail": "expected exactly token, or verification_id and code"}],
    )
