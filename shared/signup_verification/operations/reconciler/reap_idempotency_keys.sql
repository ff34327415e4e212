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
