-- The outbox's webhook replay (verifyctl webhooks replay): one file of the outbox package's named
-- statements (platform/catalogue.py).

-- name: replay_events
-- transition: accepted, failed -> ready
-- why: `verifyctl webhooks replay`: a finished webhook event is sent again, same webhook-id (guarded, unfenced)
-- replay (guarded, not fenced): finished webhook events -> ready again, with a fresh attempt budget,
-- for `verifyctl webhooks replay`. The dispatcher then sends each one as it sends any event: the
-- webhook-id is derived from the verification, the type and the subject (delivery/events.py), so the
-- receiver sees the id it saw before and deduplicates.
-- No fence: a finished intent has no lease and nobody holds one to present. The status guard is
-- what makes it safe: only accepted and failed events are taken, under the row lock this UPDATE
-- holds, so a replay racing another replay moves each event once (the second sees 'ready' and
-- skips it), and a worker whose lease on the event expired long ago still cannot write it (settle
-- and release match status 'attempting' and the lease; the next claim bumps lease_version anyway).
-- The attempt log is append-only and stays as it was: attempt numbers continue from `attempts`.
-- Batched by id (:limit rows per statement); `completed_at >= :since` holds for every event created
-- since :since (it finished after it was written) and lets the completed partial index find them.
WITH chosen AS (
    SELECT i.id, i.status FROM delivery_intents AS i
     WHERE i.role = 'event' AND i.status IN ('accepted', 'failed') AND i.completed_at IS NOT NULL
       AND (CAST(:verification_id AS uuid) IS NULL OR i.verification_id = CAST(:verification_id AS uuid))
       AND (CAST(:since AS timestamptz) IS NULL
            OR (i.created_at >= CAST(:since AS timestamptz) AND i.completed_at >= CAST(:since AS timestamptz)))
       AND i.id > :after
     ORDER BY i.id
     LIMIT :limit
       FOR UPDATE
)
UPDATE delivery_intents AS i
   SET status = 'ready', next_attempt_at = now(), max_attempts = i.attempts + :max_attempts,
       completed_at = NULL, failed_at = NULL, last_error = NULL,
       failure_category = NULL, failure_code = NULL, failure_provider = NULL, failure_fault = NULL,
       updated_at = now()
  FROM chosen AS c
 WHERE i.id = c.id AND i.status IN ('accepted', 'failed')
RETURNING i.id, i.verification_id, i.event_type, i.event_subject, c.status AS was
