"""Client for the signup verification service (its own distribution: see clients/python/README.md)."""

from __future__ import annotations

from .auth import GoogleIdToken, SignedRequests
from .client import Client, Confirmation, Delivery, Verification, VerificationState
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
from .webhooks import WebhookEvent, verify_webhook

__all__ = [
    "Client",
    "CodeIncorrect",
    "Confirmation",
    "Delivery",
    "DestinationRefused",
    "GoogleIdToken",
    "IdempotencyKeyReused",
    "InvalidRequest",
    "InvalidWebhook",
    "NotFound",
    "RateLimited",
    "SignedRequests",
    "Unauthenticated",
    "Unavailable",
    "Verification",
    "VerificationError",
    "VerificationGone",
    "VerificationState",
    "WebhookEvent",
    "verify_webhook",
]
