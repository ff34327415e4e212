"""The HTTP edge's settings: the body limit, who may call each target, where create's return_url
may point, and the delivery_reports target (README "Configuration"; each declared once,
platform/settings.py). The parsers that need the edge's own code import it where a value is set."""

from __future__ import annotations

import base64
import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..delivery.config import (
    DELIVERY_REPORTS_URL,
    EMAIL_TRANSPORT,
    TWILIO_ACCOUNT_SID,
    TWILIO_API_URL,
    TWILIO_AUTH_TOKEN,
    twilio_status_callback,
)
from ..outbox.config import FailurePolicy
from ..platform.config import Target, production_flag
from ..platform.errors import ConfigError
from ..platform.settings import Env, Setting, part, plain, setting, words
from .return_url import parse_allowed_origins

if TYPE_CHECKING:  # a key is parsed (report_signatures.py) only where SENDGRID_WEBHOOK_PUBLIC_KEY is set
    from cryptography.hazmat.primitives.asymmetric import ec

GUARDED_TARGETS = frozenset({Target.CREATE, Target.DISPATCH, Target.RECONCILE, Target.STATUS})


@dataclass(frozen=True)
class HttpConfig:
    max_body_bytes: int = setting(
        "MAX_BODY_BYTES",
        16 * 1024,
        minimum=256,
        help="a body of this many bytes or more (declared or chunked) answers 413 before any handler runs "
        '(docs/security.md "Request bodies at the edge")',
    )
    read_timeout_seconds: float = setting(
        "HTTP_READ_TIMEOUT_SECONDS",
        10.0,
        minimum=1,
        maximum=120,
        help="a request's head must arrive whole within this of its first byte (else `408`), and its body "
        "within it again; with the request-line and header limits (platform/serving.py)",
    )


@dataclass(frozen=True)
class SigningKey:
    target: Target | None  # None: every signed target; else only this one (`target:key_id:secret`)
    key_id: str
    secret: bytes = dataclasses.field(repr=False)


def parse_signing_keys(spec: str) -> tuple[SigningKey, ...]:
    """`[target:]key_id:base64url-secret[,...]` (the format of TOKEN_KEYS; `verifyctl new-key` prints
    one). With a target the key signs for that target only, so one caller's key cannot run another's."""
    keys = []
    for item in (entry.strip() for entry in spec.split(",")):
        if not item:
            continue
        target = None
        if item.count(":") == 2:
            named, _, item = item.partition(":")
            if named not in GUARDED_TARGETS:
                raise ConfigError(f"REQUEST_SIGNING_KEYS entry for {named!r}: not a guarded target")
            target = Target(named)
        key_id, sep, encoded = item.partition(":")
        try:
            secret = base64.b64decode(encoded + "=" * (-len(encoded) % 4), altchars=b"-_", validate=True)
        except ValueError:
            secret = b""
        if not sep or not key_id or len(secret) < 32:
            raise ConfigError(
                f"REQUEST_SIGNING_KEYS entry {key_id or '?'!r} must be key_id:base64url-secret of 32+ bytes"
            )
        keys.append(SigningKey(target, key_id, secret))
    return tuple(keys)


def _signed_targets(raw: str, env: Env) -> frozenset[Target]:
    named = frozenset(t.strip() for t in raw.split(",") if t.strip())
    unknown = named - GUARDED_TARGETS
    if unknown:
        raise ValueError(f"names unknown or public targets: {', '.join(sorted(unknown))}")
    return frozenset(Target(t) for t in named)


SIGNED_TARGETS = Setting(
    "SIGNED_TARGETS",
    frozenset({Target.CREATE}),
    parse=_signed_targets,
    help="which of `create_verification`, `dispatch`, `reconcile`, `status` require `Verify-Signature: "
    't=<unix>,v2=<hex HMAC-SHA256 of the canonical request>` (docs/security.md "Signed requests": the '
    "canonical string, a worked example, and where the older `v1=` and `Signature` forms are still accepted)",
)


@dataclass(frozen=True)
class AuthConfig:
    production: bool = production_flag()
    signing_keys: tuple[SigningKey, ...] = setting(
        "REQUEST_SIGNING_KEYS",
        (),
        parse=plain(parse_signing_keys),
        secret=True,
        help="`[target:]key_id:base64url-secret[,…]`: turns on signed requests for `SIGNED_TARGETS` (every key is "
        "accepted: rotation; a `target:` key signs for that target only)",
    )
    signed_targets: frozenset[Target] = SIGNED_TARGETS.field()  # none without a key (config/checks.py)
    allowed_invokers: frozenset[str] = setting(
        "ALLOWED_INVOKERS",
        frozenset(),
        parse=words(),
        shown_default="unset (any identity Cloud Run admitted)",
        help="production: the service-account emails this target accepts",
    )
    tolerance_seconds: int = setting(
        "SIGNATURE_TOLERANCE_SECONDS",
        300,
        minimum=30,
        maximum=3600,
        help="accepted clock difference of a signature; an accepted signature is refused if presented again within it",
    )

    def secrets_for(self, target: str) -> list[bytes]:
        return [k.secret for k in self.signing_keys if k.target in (None, target)]

    def __repr__(self) -> str:  # never the key material
        return (
            f"AuthConfig(production={self.production}, keys={[k.key_id for k in self.signing_keys]}, "
            f"signed_targets={sorted(self.signed_targets)}, allowed_invokers={sorted(self.allowed_invokers)})"
        )


def _allowed_origins(raw: str, env: Env) -> frozenset[str]:
    return parse_allowed_origins(raw, env.production)  # the URL rules live with the check that uses them


@dataclass(frozen=True)
class ReturnUrlConfig:
    production: bool = production_flag()
    allowed_origins: frozenset[str] = setting(
        "RETURN_URL_ALLOWED_ORIGINS",
        frozenset(),
        parse=_allowed_origins,
        shown_default="unset (no `return_url` accepted); `verifyctl dev`: the demo site's",
        help="exact origins (`https://app.example.com,https://www.example.com`) create's `return_url` may point at; "
        "`http` only for localhost outside production",
    )


def _sendgrid_key(raw: str, env: Env) -> Any:
    from . import report_signatures  # cryptography: only where the key is set

    return report_signatures.sendgrid_public_key(raw)


@dataclass(frozen=True)
class DeliveryReportsConfig:
    public_url: str | None = DELIVERY_REPORTS_URL.field()
    sendgrid_key: ec.EllipticCurvePublicKey | None = setting(
        "SENDGRID_WEBHOOK_PUBLIC_KEY",
        None,
        parse=_sendgrid_key,
        secret=True,  # a public key, kept out of reprs
        help="the Event Webhook's verification key SendGrid shows (base64): its signed events are accepted",
    )
    twilio_auth_token: str | None = TWILIO_AUTH_TOKEN.field()  # checks Twilio's X-Twilio-Signature
    # with the token: ends a call answering machine detection reports a machine on (delivery/call_control.py)
    twilio_account_sid: str | None = TWILIO_ACCOUNT_SID.field()
    twilio_api_url: str = TWILIO_API_URL.field()
    tolerance_seconds: int = setting(
        "DELIVERY_REPORTS_TOLERANCE_SECONDS", 300, minimum=30, help="accepted skew of SendGrid's signed timestamp"
    )
    max_body_bytes: int = setting(
        "DELIVERY_REPORTS_MAX_BODY_BYTES",
        1024 * 1024,
        minimum=1024,
        help="the target's body limit (a 1,000-event SendGrid batch is about 400 KB)",
    )
    failures: FailurePolicy = part(FailurePolicy)  # suppression and channel holds
    email_transport: str = EMAIL_TRANSPORT.field()  # how the reported mail went out

    @property
    def email_provider(self) -> str:
        """The provider an email report's reason names: the one the mail went out through, as the
        reasons of this deployment's send failures name it. SendGrid's Event Webhook reports on mail
        relayed over SMTP too (its SMTP relay, or the local mailbox): that is `smtp`."""
        return "smtp" if self.email_transport == "smtp" else "sendgrid"

    @property
    def status_callback(self) -> str | None:
        """What Twilio requests carry as StatusCallback (delivery/channels/twilio.py)."""
        return twilio_status_callback(self.public_url)
