"""Every reconciler duty, in the order one run sweeps them. Order matters so that one run makes at
most one transition per intent:
  suppress_dead          dead verification -> intent suppressed (before anything could revive it)
  lookup_ambiguous_sms   ambiguous SMS looked up at Twilio -> accepted | retryable (before the hold policy)
  resolve_ambiguous      ambiguous whose hold passed -> retryable | failed
  expire_claims          claimed with an expired lease -> eligible again
  lose_leases            attempting with an expired lease -> ambiguous (held: resolved by a later run)
  count_overdue          eligible work older than the polling horizon: counted and logged (moves nothing)
  reap_idempotency_keys  expired idempotency keys deleted
  reap_refused_creates   refused creates past the limits' window deleted
  redact                 destinations of finished, old verifications removed
  purge                  redacted histories past retention deleted (only after redaction drained)
"""

from __future__ import annotations

from . import (
    count_overdue,
    expire_claims,
    lookup_ambiguous_sms,
    lose_leases,
    purge,
    reap_idempotency_keys,
    reap_refused_creates,
    redact,
    resolve_ambiguous,
    suppress_dead,
)
from .duty import Duty

DUTIES: tuple[Duty, ...] = (
    suppress_dead.DUTY,
    lookup_ambiguous_sms.DUTY,
    resolve_ambiguous.DUTY,
    expire_claims.DUTY,
    lose_leases.DUTY,
    count_overdue.DUTY,
    reap_idempotency_keys.DUTY,
    reap_refused_creates.DUTY,
    redact.DUTY,
    purge.DUTY,
)
