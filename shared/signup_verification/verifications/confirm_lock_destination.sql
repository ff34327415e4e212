-- The destination is over its daily wrong-code budget: the answer is `locked`, so
-- the verification becomes locked for real, with what that means everywhere else: its undelivered
-- intents suppressed and the `verification.locked` webhook event recorded (sql/definitions/10), in
-- this statement. Only a pending, unexpired verification locks; its failure count is left as it is
-- (no code of its own was tried).
WITH locked AS (
    UPDATE verifications SET status = 'locked', updated_at = now()
     WHERE id = :id AND expires_at > now()
       AND status NOT IN ('verified', 'expired', 'superseded', 'locked')  -- pending (confirm_link.sql: why so)
    RETURNING id, verifications AS verification
)
SELECT l.id,
       (SELECT count(*) FROM suppress_undelivered_intents(ARRAY[l.id], 'locked')) AS suppressed,
       record_event(l.verification, 'verification.locked') AS events
  FROM locked AS l
