-- release, reconciler's guard: a claim whose lease expired before any send began -> eligible again.
-- Same transition as release.sql (not an attempt; an attempt begun by the fused claim gets its
-- 'released' row); only the guard differs: expiry instead of owner. "Before any send began" is
-- status 'claimed', or 'attempting' with sending_at NULL (outbox/start.sql never ran for it).
WITH expired AS (
    SELECT id FROM delivery_intents
     WHERE status IN ('claimed', 'attempting') AND lease_until <= now() AND (status = 'claimed' OR sending_at IS NULL)
     ORDER BY lease_until
     LIMIT :limit
       FOR UPDATE SKIP LOCKED
), released AS (
    UPDATE delivery_intents AS i
       SET status = CASE WHEN i.attempts = 0 THEN 'ready' ELSE 'retryable' END,
           max_attempts = i.max_attempts + (before.status = 'attempting')::integer,
           lease_owner = NULL, lease_until = NULL, updated_at = now()
      FROM expired AS e, delivery_intents AS before
     WHERE i.id = e.id AND before.id = e.id
    RETURNING i.id, i.channel, i.attempts, i.template_version, i.lease_version, i.last_claimed_at,
              before.lease_owner, before.status = 'attempting' AS begun
), logged AS (
    INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version, lease_owner,
                                   lease_version, outcome, error_class, error_detail, claimed_at)
    SELECT r.id || ':' || r.attempts, r.id, r.attempts, r.channel, r.template_version, r.lease_owner,
           r.lease_version, 'released', 'lease_expired', 'lease expired before its send started', r.last_claimed_at
      FROM released AS r
     WHERE r.begun
)
SELECT r.id, r.channel FROM released AS r
