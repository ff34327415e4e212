"""The delivery_reports target's settings (issue 13), apart from the target (delivery_reports.py):
config/ builds them on every target (issue 18)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..outbox.failure_policy import FailurePolicy

if TYPE_CHECKING:  # a key is parsed (report_signatures.py) only where SENDGRID_WEBHOOK_PUBLIC_KEY is set
    from cryptography.hazmat.primitives.asymmetric import ec


@dataclass(frozen=True)
class DeliveryReportsConfig:
    public_url: str | None = None  # DELIVERY_REPORTS_URL: the target's public base URL, as the providers call it
    sendgrid_key: ec.EllipticCurvePublicKey | None = field(default=None, repr=False)  # SENDGRID_WEBHOOK_PUBLIC_KEY
    twilio_auth_token: str | None = field(default=None, repr=False)  # TWILIO_AUTH_TOKEN
    tolerance_seconds: int = 300  # DELIVERY_REPORTS_TOLERANCE_SECONDS: SendGrid timestamp skew
    max_body_bytes: int = 1024 * 1024  # DELIVERY_REPORTS_MAX_BODY_BYTES: a 1,000-event batch is ~400 KB
    failures: FailurePolicy = field(default_factory=FailurePolicy)  # suppression and channel holds

    @property
    def status_callback(self) -> str | None:
        """What Twilio requests carry as StatusCallback (delivery/channels/twilio.py)."""
        return f"{self.public_url.rstrip('/')}/twilio" if self.public_url else None
