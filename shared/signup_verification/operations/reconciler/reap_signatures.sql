-- Accepted request signatures past their tolerance window (signature_replay), in a bounded batch.
WITH due AS (
    SELECT digest FROM signature_replay
     WHERE expires_at <= now()
     ORDER BY expires_at
     LIMIT :limit
)
DELETE FROM signature_replay AS s
 USING due
 WHERE s.digest = due.digest
RETURNING s.digest
