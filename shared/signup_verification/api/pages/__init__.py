"""The HTML pages a person sees when opening a confirmation link: small, accessible, no external assets.

Every page is sent with headers that keep the token where it belongs: not cached (`no-store`), not
leaked to another site in a Referer (`no-referrer`), not framed (clickjacking the Confirm button),
and a Content-Security-Policy that allows only the inline style whose hash it names and a form
posting back here.
"""
from __future__ import annotations

import base64
import hashlib
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qs

import flask
import jinja2

from .. import problems
from ...verifications.confirm import ALREADY_VERIFIED, EXPIRED, INVALID, LOCKED, PENDING, SUPERSEDED, VERIFIED, WRONG_CODE, Outcome
from ...platform.database import UnavailableError

_DIR = Path(__file__).resolve().parent
_env = jinja2.Environment(loader=jinja2.FileSystemLoader(_DIR), autoescape=True, undefined=jinja2.StrictUndefined)
STYLE = (_DIR / "style.css").read_text(encoding="utf-8").strip()
_STYLE_HASH = base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()

SECURITY_HEADERS = {
    "Content-Type": "text/html; charset=utf-8",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": (f"default-src 'none'; style-src 'sha256-{_STYLE_HASH}'; form-action 'self'; "
                                "base-uri 'none'; frame-ancestors 'none'"),
}

# result -> (template, HTTP status). Dead links are 410 Gone, like the JSON API.
_PAGES = {
    PENDING: ("confirm.html", 200),
    VERIFIED: ("verified.html", 200),
    ALREADY_VERIFIED: ("already.html", 200),
    EXPIRED: ("expired.html", 410),
    SUPERSEDED: ("superseded.html", 410),
    LOCKED: ("locked.html", 410),
    WRONG_CODE: ("invalid.html", 404),  # links have no codes; never reached, but never a 500 either
    INVALID: ("invalid.html", 404),
}

Response = tuple[str, int, dict[str, str]]


def render(template: str, status: int = 200, headers: dict[str, str] | None = None, **variables: Any) -> Response:
    variables.setdefault("product", None)
    html = _env.get_template(template).render(style=STYLE, **variables)
    return html, status, {**SECURITY_HEADERS, **(headers or {})}


def outcome_page(outcome: Outcome, token: str | None = None, product: str | None = None) -> Response:
    template, status = _PAGES[outcome.result]
    minutes_left = None
    if outcome.result == PENDING and outcome.expires_at is not None:
        seconds = (outcome.expires_at - datetime.now(timezone.utc)).total_seconds()
        minutes_left = max(1, math.floor(seconds / 60))  # as the message counts them
    return render(template, status, token=token or "", destination_hint=outcome.destination_hint,
                  minutes_left=minutes_left, product=product)


def invalid_page(status: int = 404) -> Response:
    return render("invalid.html", status)


def guarded(produce: Callable[[], Response]) -> Response:
    """A page even when the database is away: people get words and a retry hint, not JSON."""
    try:
        return produce()
    except UnavailableError:
        return render("unavailable.html", 503, {"Retry-After": "5"})


def form_token(request: flask.Request, max_bytes: int) -> str | None:
    """The `token` field of the page's form post (urlencoded), read with the body limit."""
    if request.mimetype != "application/x-www-form-urlencoded":
        raise problems.Problem(415, "unsupported-media-type", "Unsupported media type",
                               "Post the confirmation form, or send Content-Type: application/json.")
    if request.content_length is not None and request.content_length > max_bytes:
        raise problems.too_large(max_bytes)
    raw = request.stream.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise problems.too_large(max_bytes)
    fields = parse_qs(raw.decode("utf-8", errors="replace"), max_num_fields=10)
    values = fields.get("token") or request.args.getlist("token")
    return values[0] if values else None
