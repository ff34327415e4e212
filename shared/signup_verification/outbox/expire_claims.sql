-- release, reconciler's guard: a claim whose lease expired before any send began -> eligible again.
-- Same transition as release.sql (not an attempt); only the guard differs: expiry instead of owner.
WITH expired AS (
    SELECT id FROM delivery_intents
     WHERE status = 'claimed' AND lease_until <= now()
     ORDER BY lease_until
     LIMIT :limit
       FOR UPDATE SKIP LOCKED
)
UPDATE delivery_intents AS i
   SET status = CASE WHEN i.attempts = 0 THEN 'ready' ELSE 'retryable' END,
       lease_owner = NULL, lease_until = NULL, updated_at = now()
  FROM expired AS e
 WHERE i.id = e.id
RETURNING i.id, i.channel
