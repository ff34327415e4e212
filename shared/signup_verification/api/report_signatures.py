"""The providers' own signatures on delivery reports: the only guard of a public target.

* SendGrid's Signed Event Webhook: ECDSA P-256 / SHA-256 over `timestamp + raw body`; the
  signature (`X-Twilio-Email-Event-Webhook-Signature`) is base64 DER, the key SendGrid shows is
  base64 DER SubjectPublicKeyInfo. SendGrid documents no timestamp window; we refuse one more
  than `tolerance` seconds off (a captured batch cannot be replayed later; within the window a
  replay is one row per event anyway: ingest is idempotent).
* Twilio's X-Twilio-Signature: base64 HMAC-SHA1 under the auth token of the full URL, then each
  POST parameter's name and value in name order (a repeated name: its values sorted), as
  twilio.com/docs/usage/security documents. The URL is the configured public one, never the Host
  header; Twilio may sign it with or without the scheme's default port, so both are accepted.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Sequence
from urllib.parse import urlsplit, urlunsplit

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


def twilio_signature(auth_token: str, url: str, params: Sequence[tuple[str, str]]) -> str:
    """Twilio's X-Twilio-Signature of a form POST to `url` (twilio-python's RequestValidator)."""
    values: dict[str, list[str]] = {}
    for name, value in params:
        values.setdefault(name, []).append(value)
    signed = url + "".join(name + value for name in sorted(values) for value in sorted(values[name]))
    digest = hmac.new(auth_token.encode("utf-8"), signed.encode("utf-8"), hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def twilio_valid(auth_token: str, url: str, params: Sequence[tuple[str, str]], signature: str) -> bool:
    """Constant-time check against the URL as configured, with and without its default port."""
    return any(
        hmac.compare_digest(twilio_signature(auth_token, candidate, params).encode(), signature.encode("utf-8"))
        for candidate in _port_variants(url)
    )


def _port_variants(url: str) -> list[str]:
    parts = urlsplit(url)
    default = {"https": 443, "http": 80}.get(parts.scheme)
    host = parts.hostname or ""
    if default is None or not host:
        return [url]
    if parts.port is None:
        other = parts._replace(netloc=f"{host}:{default}")
    elif parts.port == default:
        other = parts._replace(netloc=host)
    else:
        return [url]
    return [url, urlunsplit(other)]
