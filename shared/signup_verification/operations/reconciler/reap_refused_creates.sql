-- Refused creates older than a day (well past the limits' one-hour window, verifications/create.sql),
-- oldest first, in a bounded batch, on the partial index create_events_refused (sql/026).
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
