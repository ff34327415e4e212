"""Every problem type an answer can carry, documented where its `type` URI points.

A problem's `type` is the relative reference `/problems/<slug>` (RFC 9457 §3.1.1: resolved against
the URL that was called), and every target serves that path: `GET /problems/<slug>` answers a page
saying what the problem means and what to do, `GET /problems/` lists them all (api/edge.py). The
same table is docs/problems.md (tools/generate_docs.py writes it from TYPES), and
tests/unit/test_problem_types.py holds every slug the code can emit to an entry here.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from .page_headers import SECURITY_HEADERS, STYLE

BASE = "/problems/"


@dataclass(frozen=True)
class ProblemType:
    slug: str
    statuses: tuple[int, ...]
    title: str
    meaning: str  # what happened and what the caller does about it

    @property
    def uri(self) -> str:
        return BASE + self.slug


def _types(*found: ProblemType) -> dict[str, ProblemType]:
    return {t.slug: t for t in found}


TYPES = _types(
    # -- any target
    ProblemType("invalid-request", (400,), "The request is invalid",
                "The body or a header could not be read, or failed validation: `errors` names each field "
                "(`pointer`, `detail`). Fix the request; sent again unchanged it fails again."),
    ProblemType("unauthenticated", (401,), "Authentication required",
                "The target needs its caller's identity: in production a Google ID token Cloud Run verified, "
                "or a valid `Verify-Signature` (docs/security.md). Nothing was done."),
    ProblemType("method-not-allowed", (405,), "Method not allowed",
                "The target does not take this method; the `Allow` header names those it takes."),
    ProblemType("payload-too-large", (413,), "Request body too large",
                "The body is at least the target's limit (`MAX_BODY_BYTES`); `detail` names the largest "
                "accepted. Nothing was read past the limit."),
    ProblemType("unsupported-media-type", (415,), "Unsupported media type",
                "Send `Content-Type: application/json` (the confirm target also takes its own form's post)."),
    ProblemType("service-unavailable", (503,), "Service temporarily unavailable",
                "The database could not be reached; nothing was written. Retry the same request (with the same "
                "`Idempotency-Key`) after `Retry-After` seconds."),
    ProblemType("internal-error", (500,), "Internal error",
                "An unexpected error, logged with its request; nothing is said about it here. Retry later."),
    ProblemType("http-error", (404, 405), "HTTP error",
                "The web server's own refusal, before any target code ran (a path or method of its reserved "
                "routes); `title` is the HTTP reason."),
    ProblemType("request-timeout", (408,), "The request did not arrive in time",
                "The request's head (or its body) was not received within `HTTP_READ_TIMEOUT_SECONDS` of its "
                "first byte; the server refused it before any target code ran. Send it again, whole."),
    ProblemType("request-line-too-long", (414,), "The request line is too long",
                "The method, path and query must fit in 8,190 bytes; nothing was read past that."),
    ProblemType("request-headers-too-large", (431,), "The request's headers are too large",
                "At most 100 header fields of at most 8,190 bytes each, 64 KiB in all; the request was refused "
                "before any target code ran."),
    # -- create_verification
    ProblemType("idempotency-key-reused", (422,), "Idempotency-Key reused with a different request",
                "This `Idempotency-Key` was first used with another body. Use a new key for a new request; the "
                "same body with the same key replays the first answer."),
    ProblemType("sms-country-not-allowed", (422,), "SMS to this country is not enabled",
                "The number's country is not in `SMS_ALLOWED_COUNTRIES` (which SMS, WhatsApp and voice share); "
                "`errors` points at the field that holds it. Offer the user another channel."),
    ProblemType("sms-number-type-not-allowed", (422,), "This kind of number cannot receive the code",
                "The number is not of a type in `SMS_ALLOWED_NUMBER_TYPES` (a landline, premium-rate, VoIP, ...). "
                "Ask the user for a mobile number; a landline can be reached by a voice call (channel `voice`), "
                "the one channel that accepts it."),
    ProblemType("channel-not-offered", (422,), "This channel is not offered",
                "The deployment does not send on this channel (`whatsapp` or `voice` in production without "
                "`WHATSAPP_TRANSPORT` / `VOICE_TRANSPORT` set to `twilio` on create and dispatch); `errors` points "
                "at the field that names it. Use another channel."),
    ProblemType("destination-suppressed", (422,), "This destination cannot receive messages",
                "A delivery to this exact address or number failed for good for the recipient's fault (a hard "
                "bounce, an invalid or unsubscribed number, a spam report): ask the user for another one. An "
                "operator lifts it with `verifyctl suppression clear`."),
    ProblemType("rate-limited", (429,), "Too many verifications",
                "Too many creates for this destination, account, number prefix, country or client; not stored "
                "against the `Idempotency-Key`. Retry after `Retry-After` seconds."),
    ProblemType("verification-not-found", (404,), "No such verification",
                "An unknown or malformed verification id, link or code target: nothing is said about accounts "
                "or destinations. Check the whole link or id was used."),
    # -- confirm_verification (JSON)
    ProblemType("verification-expired", (410,), "This verification has expired",
                "Its link or code lived `VERIFICATION_TTL_SECONDS`; only a new verification helps."),
    ProblemType("verification-superseded", (410,), "A newer verification replaced this one",
                "A later create for the same account and channel replaced it; use the newest link or code."),
    ProblemType("verification-locked", (410,), "Too many wrong codes",
                "`MAX_CONFIRM_ATTEMPTS` wrong codes (or `CODE_FAILURES_PER_DESTINATION_PER_DAY` for the number) "
                "locked it; only a new verification helps."),
    ProblemType("verification-finished", (410,), "This verification can no longer be confirmed",
                "A code for a verification that ended, whichever way (verified, expired, replaced, locked): "
                "the read API says which. A wrong code still counts against the limits."),
    ProblemType("code-incorrect", (422,), "The code is not correct",
                "`remaining_attempts` says how many tries are left before the verification locks."),
    # -- dispatch
    ProblemType("fanout-slot-not-claimed", (200,), "This fan-out slot was not claimed: nothing ran",
                "A fan-out task named a slot that is not reserved, was claimed already (a replayed or repeated "
                "task), or lapsed. Nothing ran; the answer is 2xx so that Cloud Tasks does not retry it."),
    # -- delivery_reports
    ProblemType("report-unsigned", (401,), "The report is not signed",
                "A provider's report without its signature headers; nothing was stored."),
    ProblemType("report-signature-invalid", (403,), "The report's signature is not valid",
                "The signature does not match the body, or its timestamp is stale; nothing was stored "
                "(docs/deploy.md, delivery reports)."),
    ProblemType("reports-not-configured", (403,), "Reports from this provider are not accepted",
                "The provider's verification key or token is not set on this deployment (docs/deploy.md)."),
    ProblemType("not-found", (404,), "Not found", "The delivery_reports target takes POST /sendgrid and POST /twilio."),
)  # fmt: skip


def page(slug: str | None) -> tuple[str, int, dict[str, str]] | None:
    """`GET /problems/<slug>`: the page of one type; `GET /problems/`: all of them; None: no such type."""
    if slug:
        found = TYPES.get(slug)
        if found is None:
            return None
        return _html(found.title, _entry(found, heading=False) + f'<p><a href="{BASE}">Every problem type</a></p>')
    body = "".join(_entry(t, heading=True) for t in TYPES.values())
    return _html("Problem types", "<p>The <code>type</code> of every error answer, and what to do.</p>" + body)


def _entry(found: ProblemType, *, heading: bool) -> str:
    statuses = ", ".join(str(s) for s in found.statuses)
    title = f'<h2 id="{found.slug}"><a href="{found.uri}">{html.escape(found.slug)}</a></h2>' if heading else ""
    return f"{title}<p><code>{found.uri}</code> · HTTP {statuses}</p><p>{_code(found.meaning)}</p>"


def _code(text: str) -> str:
    """Markdown's `code` spans as <code>, the rest escaped."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _html(title: str, body: str) -> tuple[str, int, dict[str, str]]:
    text = (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        f'<main class="info" aria-labelledby="title">\n<h1 id="title">{html.escape(title)}</h1>\n{body}\n</main>\n'
        "</body>\n</html>\n"
    )
    return text, 200, dict(SECURITY_HEADERS)
