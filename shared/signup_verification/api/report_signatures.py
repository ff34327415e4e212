"""The providers' own signatures on delivery reports: the only guard of a public target.

* SendGrid's Signed Event Webhook: ECDSA P-256 / SHA-256 over `timestamp + raw body`; the
  signature (`X-Twilio-Email-Event-Webhook-Signature`) is base64 DER, the key SendGrid shows is
  base64 DER SubjectPublicKeyInfo. SendGrid documents no timestamp window; we refuse one more
  than `tolerance` seconds off (a captured batch cannot be replayed later; within the window a
  replay is one row per event anyway: ingest is idempotent).
* Twilio's X-Twilio-Signature: base64 HMAC-SHA1 under the auth token of the full URL, then each
  POST parameter's name and value in name order, as twilio.com/docs/usage/security documents. The
  URL is the configured public one with the query as received (it names the report's attempt:
  api/delivery_reports.py), never the Host header. Accepted is exactly what twilio-python's
  RequestValidator.validate accepts for that URL and the form as Flask parses it (twilio_form):
  a name's values sorted and each distinct value signed once; the URL as urlparse gives it back,
  user-info included, with its port removed (everything after the netloc's first ':', as
  remove_port does) or, when it has none, the scheme's default port added. The only difference: a
  form of more than 100 fields is refused unread (Twilio's callbacks carry about 15).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Sequence
from urllib.parse import ParseResult, parse_qsl, urlparse

import werkzeug.urls  # noqa: F401  (registers the "werkzeug.url_quote" codec error handler Flask's forms use)

# cryptography (~30 ms): this module is imported by the delivery_reports target's edge, and by the
# configuration only where SENDGRID_WEBHOOK_PUBLIC_KEY is set
from cryptography.hazmat.primitives.asymmetric import ec

from ..platform.errors import ConfigError


def sendgrid_public_key(encoded: str) -> ec.EllipticCurvePublicKey:
    """The verification key as SendGrid shows it (base64 DER), or ConfigError."""
    from cryptography.hazmat.primitives.serialization import load_der_public_key

    try:
        key = load_der_public_key(base64.b64decode(encoded.strip(), validate=True))
    except (ValueError, binascii.Error, TypeError):
        raise ConfigError("SENDGRID_WEBHOOK_PUBLIC_KEY must be the base64 verification key SendGrid shows") from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or not isinstance(key.curve, ec.SECP256R1):
        raise ConfigError("SENDGRID_WEBHOOK_PUBLIC_KEY must be an ECDSA P-256 key")
    return key


def sendgrid_valid(key: ec.EllipticCurvePublicKey, signature: str, timestamp: str, body: bytes) -> bool:
    """Whether `signature` is SendGrid's over timestamp + body (the timestamp's age is checked apart)."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes

    try:
        der = base64.b64decode(signature, validate=True)
        key.verify(der, timestamp.encode("ascii") + body, ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError, binascii.Error, UnicodeEncodeError):
        return False
    return True


def sendgrid_fresh(timestamp: str, now: float, tolerance: int) -> bool:
    return (
        timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= 12 and abs(now - int(timestamp)) <= tolerance
    )


TWILIO_MAX_FIELDS = 100


def twilio_form(body: bytes, mimetype: str) -> list[tuple[str, str]] | None:
    """The POST parameters as Flask's `request.form` holds them (what RequestValidator is given):
    a form body parsed as werkzeug parses it (blank values kept, a name without `=` a blank value, an
    escape that is not UTF-8 kept as written), nothing for any other content type; None when the body
    is not UTF-8 (Flask refuses it) or holds more than TWILIO_MAX_FIELDS fields."""
    if mimetype != "application/x-www-form-urlencoded":
        return []
    try:
        text = body.decode("utf-8")
        return parse_qsl(text, keep_blank_values=True, errors="werkzeug.url_quote", max_num_fields=TWILIO_MAX_FIELDS)
    except (UnicodeDecodeError, ValueError):
        return None


def twilio_signature(auth_token: str, url: str, params: Sequence[tuple[str, str]]) -> str:
    """Twilio's X-Twilio-Signature of a form POST to `url`: the URL, then each name in order with
    each of its distinct values in order (RequestValidator.compute_signature)."""
    values: dict[str, set[str]] = {}
    for name, value in params:
        values.setdefault(name, set()).add(value)
    signed = url + "".join(name + value for name in sorted(values) for value in sorted(values[name]))
    digest = hmac.new(auth_token.encode("utf-8"), signed.encode("utf-8"), hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def twilio_valid(auth_token: str, url: str, params: Sequence[tuple[str, str]], signature: str) -> bool:
    """Constant-time check against the URL as configured, without its port and with one (as
    RequestValidator.validate: remove_port, add_port)."""
    try:
        parsed = urlparse(url)
        candidates = (_without_port(parsed), _with_port(parsed))
    except ValueError:  # a port that is no number: RequestValidator raises, nothing is accepted
        return False
    expected = signature.encode("utf-8")
    return any(hmac.compare_digest(twilio_signature(auth_token, c, params).encode(), expected) for c in candidates)


def _without_port(uri: ParseResult) -> str:
    if not uri.port:
        return uri.geturl()
    return uri._replace(netloc=uri.netloc.split(":")[0]).geturl()


def _with_port(uri: ParseResult) -> str:
    if uri.port:
        return uri.geturl()
    return uri._replace(netloc=uri.netloc + ":" + ("443" if uri.scheme == "https" else "80")).geturl()
