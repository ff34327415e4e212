-- claim: eligible -> claimed. One short transaction, committed before any network call.
-- Reads the shared eligibility view; SKIP LOCKED lets concurrent workers take disjoint batches.
-- Returns what the worker needs to render and to fence its later writes (lease_version).
WITH candidate AS (
    SELECT id FROM eligible_delivery_intents
     ORDER BY next_attempt_at, id
     LIMIT :limit
       FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE delivery_intents AS i
       SET status = 'claimed', lease_owner = :owner,
           lease_until = now() + make_interval(secs => :lease_seconds),
           lease_version = i.lease_version + 1, last_claimed_at = now(), updated_at = now()
      FROM candidate AS c
     WHERE i.id = c.id
    RETURNING i.*
)
SELECT c.id, c.verification_id, c.channel, c.purpose, c.locale, c.template_version, c.attempts,
       c.max_attempts, c.ambiguous_count, c.lease_version, c.lease_until, c.next_attempt_at, c.created_at,
       v.destination, v.key_id, v.token_nonce, v.expires_at, v.status AS verification_status
  FROM claimed AS c
  JOIN verifications AS v ON v.id = c.verification_id
 ORDER BY c.next_attempt_at, c.id
