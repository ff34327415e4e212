"""Every reconciler duty, in the order one run sweeps them. Order matters so that one run makes at
most one transition per intent:
  suppress_dead            dead verification -> intent suppressed (before anything could revive it)
  lookup_ambiguous_twilio  ambiguous SMS, WhatsApp message or call looked up at Twilio -> accepted | retryable
                           (before the hold policy)
  resolve_ambiguous        ambiguous whose hold passed -> retryable | failed
  expire_claims            claimed with an expired lease -> eligible again
  lose_leases              attempting with an expired lease -> ambiguous (held: resolved by a later run)
  count_overdue            eligible work older than the polling horizon: counted and logged (moves nothing)
  reap_idempotency_keys    expired idempotency keys (and accepted request signatures) deleted
  reap_refused_creates     refused creates past the limits' window deleted
  redact                   destinations of finished, old verifications removed
  purge                    redacted histories past retention deleted (only after redaction drained)
"""

from __future__ import annotations

from ...outbox import transitions
from ...platform.catalogue import catalogue
from . import count_overdue, lookup_ambiguous_twilio, purge, redact, resolve_ambiguous, suppress_dead
from .batches import Batched, statements
from .duty import Duty

_PLATFORM, _VERIFICATIONS = catalogue("platform"), catalogue("verifications")

# The duties that are one statement (or two) repeated in bounded batches, one row each.
BATCHED: dict[str, Batched] = {
    row.name: row
    for row in (
        # A claim whose lease expired before any send began becomes eligible again: the worker stopped
        # between claim and begin (crash, timeout, SIGTERM without release). No send started, so it is
        # not an attempt and uses none of the intent's budget (claimed -> ready | retryable).
        Batched(
            "expire_claims",
            "claims_expired",
            lambda context, limit: [len(transitions.expire_claims(context.db, limit))],
            recovery=True,
        ),
        # An attempt whose lease expired becomes ambiguous: the worker began the send and stopped, so the
        # provider may or may not have sent. Held for the channel's hold time, with an attempt row
        # (ambiguous, error_class lease_lost) in the same statement; it counts as an attempt, so an
        # intent that keeps killing its worker cannot loop forever.
        Batched(
            "lose_leases",
            "leases_lost",
            lambda context, limit: [len(transitions.lose_leases(context.db, context.config.policy, limit))],
            recovery=True,
        ),
        # Idempotency keys past their retention (IDEMPOTENCY_TTL_SECONDS) and accepted request signatures
        # past their tolerance window (signature_replay): create already treats an expired key as unused;
        # reaping keeps the table, and the index every create probes, one retention window in size.
        Batched(
            "reap_idempotency_keys",
            "idempotency_keys_reaped",
            statements(_VERIFICATIONS["reap_idempotency_keys"], _PLATFORM["reap_signatures"]),
        ),
        # Refused creates (the suppression list's 422, another destination's 429) count against the
        # caller's account and client limits for one window (count_refused_create); past it they go.
        Batched("reap_refused_creates", "refused_creates_reaped", statements(_VERIFICATIONS["reap_refused_creates"])),
    )
}

DUTIES: tuple[Duty, ...] = (
    suppress_dead.DUTY,
    lookup_ambiguous_twilio.DUTY,
    resolve_ambiguous.DUTY,
    BATCHED["expire_claims"].duty,
    BATCHED["lose_leases"].duty,
    count_overdue.DUTY,
    BATCHED["reap_idempotency_keys"].duty,
    BATCHED["reap_refused_creates"].duty,
    redact.DUTY,
    purge.DUTY,
)
