-- A wrong SMS code: count it atomically; the attempt that reaches the limit locks the verification
-- (and suppresses what it had left to send, every channel). Only a pending, unexpired verification counts tries.
WITH failed AS (
    UPDATE verifications
       SET confirm_failures = confirm_failures + 1,
           status = CASE WHEN confirm_failures + 1 >= max_confirm_failures THEN 'locked' ELSE status END,
           updated_at = now()
     WHERE id = :id AND (channel = 'sms' OR fallback_channel = 'sms') AND status = 'pending' AND expires_at > now()
    RETURNING id, status, confirm_failures, max_confirm_failures
)
SELECT f.id, f.status, f.confirm_failures, f.max_confirm_failures,
       CASE WHEN f.status = 'locked'
            THEN (SELECT count(*) FROM suppress_undelivered_intents(ARRAY[f.id], 'locked')) ELSE 0 END
           AS suppressed
  FROM failed AS f
