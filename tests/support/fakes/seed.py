"""Seed many deliverable intents with one INSERT (the create API is slower and rate-limited).

The rows are what create_verification writes, minus the idempotency record: a pending
verification signed with the test key and its `ready` intent. Destinations are unique per row.
"""

from __future__ import annotations

SEED_SQL = """
WITH v AS (
    INSERT INTO verifications (id, account_id, channel, destination, purpose, locale, key_id, token_nonce,
                               token_digest, expires_at)
    SELECT gen_random_uuid(), :prefix || '-acct-' || i,
           CASE WHEN i % :sms_every = 0 THEN 'sms' ELSE 'email' END,
           CASE WHEN i % :sms_every = 0 THEN '+1415' || lpad(((:offset + i) % 10000000)::text, 7, '0')
                ELSE :prefix || '-user' || i || '@example.com' END,
           'signup', :locale, :key_id,
           decode(md5(:prefix || i::text) || md5(:prefix || (i + 1)::text), 'hex'),
           sha256((:prefix || '/' || i)::bytea), now() + make_interval(secs => :ttl)
      FROM generate_series(1, :n) AS i
    RETURNING id, channel
)
INSERT INTO delivery_intents (verification_id, channel, purpose, locale, template_version, max_attempts)
SELECT v.id, v.channel, 'signup', :locale, 'signup/v1', :max_attempts FROM v
RETURNING id
"""


def seed_intents(
    db,
    n: int,
    *,
    sms_every: int = 0,
    prefix: str = "seed",
    locale: str = "en",
    key_id: str = "test-k1",
    ttl: int = 600,
    max_attempts: int = 5,
    offset: int = 0,
) -> list[int]:
    """n intents; every `sms_every`-th one is SMS (0: all email). Returns the intent ids."""
    rows = db.run(
        SEED_SQL,
        n=n,
        sms_every=sms_every or n + 1,
        prefix=prefix,
        locale=locale,
        key_id=key_id,
        ttl=ttl,
        max_attempts=max_attempts,
        offset=offset,
    )
    return [r[0] for r in rows]
