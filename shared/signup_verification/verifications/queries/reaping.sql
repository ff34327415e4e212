-- What the reconciler reaps of the verifications' bookkeeping: one file of the verifications package's
-- named statements (platform/catalogue.py).

-- name: reap_idempotency_keys
-- Idempotency keys past their expiry, oldest first, in a bounded batch. SKIP LOCKED: a create that
-- is re-using an expired key holds its row and keeps it (create re-inserts a key reaped under it).
WITH due AS (
    SELECT scope, key FROM idempotency_keys
     WHERE expires_at <= now()
     ORDER BY expires_at
     LIMIT :limit
       FOR UPDATE SKIP LOCKED
)
DELETE FROM idempotency_keys AS k
 USING due
 WHERE k.scope = due.scope AND k.key = due.key
RETURNING k.scope

-- name: reap_refused_creates
-- Refused creates older than a day (well past the limits' one-hour window, verifications/queries/create.sql:create),
-- oldest first, in a bounded batch, on the partial index create_events_refused.
WITH due AS (
    SELECT verification_id FROM create_events
     WHERE role = 'refused' AND created_at < now() - interval '1 day'
     ORDER BY created_at
     LIMIT :limit
)
DELETE FROM create_events AS e
 USING due
 WHERE e.verification_id = due.verification_id AND e.role = 'refused'
RETURNING e.verification_id
