"""Client for the signup verification service (its own distribution: see clients/python/README.md)."""

from __future__ import annotations

from .auth import GoogleIdToken, SignedRequests
from .client import Client
from .errors import (
    CodeIncorrect,
    DestinationRefused,
    IdempotencyKeyReused,
    InvalidRequest,
    InvalidWebhook,
    NotFound,
    RateLimited,
    Unauthenticated,
    Unavailable,
    VerificationError,
    VerificationGone,
)
from .models import (
    Confirmation,
    Delivery,
    DeliveryReason,
    Fallback,
    FallbackPolicy,
    Proof,
    Step,
    StepPolicy,
    Verification,
    VerificationState,
)
from .webhooks import WebhookEvent, verify_webhook

__all__ = [
    "Client",
    "CodeIncorrect",
    "Confirmation",
    "Delivery",
    "DeliveryReason",
    "DestinationRefused",
    "Fallback",
    "FallbackPolicy",
    "StepPolicy",
    "GoogleIdToken",
    "IdempotencyKeyReused",
    "InvalidRequest",
    "InvalidWebhook",
    "NotFound",
    "Proof",
    "RateLimited",
    "SignedRequests",
    "Step",
    "Unauthenticated",
    "Unavailable",
    "Verification",
    "VerificationError",
    "VerificationGone",
    "VerificationState",
    "WebhookEvent",
    "verify_webhook",
]
