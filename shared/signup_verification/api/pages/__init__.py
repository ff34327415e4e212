"""The HTML pages a person sees when opening a confirmation link or the code-entry page: small,
accessible, no external assets, in the verification's language.

Every page is sent with headers that keep the token where it belongs: not cached (`no-store`), not
leaked to another site in a Referer (`no-referrer`), not framed (clickjacking the Confirm button),
and a Content-Security-Policy that allows only the inline style whose hash it names and a form
posting back here.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import jinja2
from markupsafe import Markup, escape
from werkzeug.datastructures import LanguageAccept
from werkzeug.http import parse_accept_header

from ...platform import timestamps
from ...platform.database import UnavailableError
from ...verifications.confirm import Outcome, Result
from ...verifications.tokens import ENTRY_PARAMETER, LINK_PARAMETER
from .. import problems
from ..http import Incoming
from ..page_headers import SECURITY_HEADERS, STYLE  # shared with api/edge.py's errors
from .strings import DEFAULT, STRINGS

_DIR = Path(__file__).resolve().parent
_env = jinja2.Environment(loader=jinja2.FileSystemLoader(_DIR), autoescape=True, undefined=jinja2.StrictUndefined)

Response = tuple[str, int, dict[str, str]]
FIELDS = {"link": LINK_PARAMETER, "code": ENTRY_PARAMETER}  # the query / form field each kind of page carries


def choose_locale(verification_locale: str | None, accept_language: str | None) -> str:
    """The verification's locale (its email/SMS used it), else the browser's Accept-Language."""
    for candidate in (verification_locale, (verification_locale or "").split("-")[0].lower()):
        if candidate in STRINGS:
            return candidate
    offered = parse_accept_header(accept_language or "", LanguageAccept)
    return offered.best_match(list(STRINGS), default=DEFAULT) or DEFAULT


def _translator(locale: str, kind: str, channel: str | None = None) -> Callable[..., Markup]:
    """`t(key, **values)`: the string in the locale; on a page about a code, its `<key>_<channel>`
    variant where one exists (a WhatsApp message or a call rather than a text message), else its
    `<key>_code` one (strings.py: "This code has expired" rather than "This link has expired")."""
    table = STRINGS[locale]
    variants = (f"_{channel}", f"_{kind}") if kind == "code" and channel else (f"_{kind}",)

    def t(key: str, **values: Any) -> Markup:
        # Plain text in, markup out: the string and every value filled in are escaped (a hint in bold).
        filled = {
            name: Markup("<strong>{}</strong>").format(value) if name == "hint" else value
            for name, value in values.items()
        }
        text = next((table[key + v] for v in variants if key + v in table), table[key])
        return escape(text).format(**filled)

    return t


def render(
    template: str,
    status: int = 200,
    headers: dict[str, str] | None = None,
    locale: str = DEFAULT,
    kind: str = "link",
    channel: str | None = None,
    **variables: Any,
) -> Response:
    variables.setdefault("product", None)
    variables.setdefault("return_url", None)
    t = _translator(locale, kind, channel)
    variables["product_or_site"] = variables["product"] or STRINGS[locale]["the_site"]
    html = _env.get_template(template).render(style=STYLE, lang=locale, t=t, kind=kind, **variables)
    return html, status, {**SECURITY_HEADERS, **(headers or {})}


def outcome_page(
    template: str,
    status: int,
    outcome: Outcome,
    value: str | None = None,
    product: str | None = None,
    locale: str = DEFAULT,
    *,
    kind: str = "link",
    error: str | None = None,
    digits: int | None = None,
) -> Response:
    """The page api/confirm.py's rendering of this outcome names. `kind`: what the person holds, an
    email's `link` or a text message's `code` (the code-entry page): the words follow it. `value`: the
    link's token or the code-entry page's handle, for the page's form. `error`: why the code-entry
    form is shown again (`wrong`: counted, `malformed`: not N digits, not counted)."""
    minutes_left = None
    if outcome.result in (Result.PENDING, Result.WRONG_CODE) and outcome.expires_at is not None:
        minutes_left = timestamps.minutes_left(outcome.expires_at, datetime.now(UTC))  # as the message says
    return render(
        template,
        status,
        locale=locale,
        kind=kind,
        channel=outcome.presented,  # the code step the page speaks for: its words name that message or call
        field=FIELDS[kind],
        value=value or "",
        destination_hint=outcome.destination_hint,
        minutes_left=minutes_left,
        product=product,
        return_url=outcome.return_url,  # only ever the stored, origin-checked URL
        error=error,
        remaining=outcome.remaining_attempts,
        digits=digits,
    )


def guarded(produce: Callable[[], Response], request: Incoming, kind: str, value: str | None) -> Response:
    """A page even when the database is away: people get words and a retry button, not JSON.

    The button repeats what the person did, deliberately: after the form's POST a reload would
    resubmit silently (the browser asks "resend form data?"), so the page offers a labelled
    button that posts the same token again; after a GET it fetches the same URL again. A code is
    never written back into a page: after the code-entry form the button opens the form again."""
    try:
        return produce()
    except UnavailableError:
        locale = choose_locale(None, request.headers.get("Accept-Language"))
        return render(
            "unavailable.html",
            503,
            {"Retry-After": "5"},
            locale=locale,
            kind=kind,
            field=FIELDS[kind],
            value=value or "",
            method="post" if request.method == "POST" and kind == "link" else "get",
        )


def form_fields(request: Incoming) -> dict[str, str]:
    """The fields of the page's form post (urlencoded; the body was read at the edge), first values."""
    if request.mimetype != "application/x-www-form-urlencoded":
        raise problems.Problem(
            415,
            "unsupported-media-type",
            "Unsupported media type",
            "Post the confirmation form, or send Content-Type: application/json.",
        )
    try:
        fields = parse_qs(request.body.decode("utf-8", errors="replace"), max_num_fields=10)
    except ValueError:  # more than 10 fields: parse_qs raises instead of truncating
        raise problems.bad_request("The form has too many fields.") from None
    return {name: values[0] for name, values in fields.items()}
