-- A wrong SMS code: count it atomically; the attempt that reaches the limit locks the verification
-- (and suppresses what it had left to send, every channel, and records the `verification.locked`
-- webhook event: sql/definitions/10_record_event.sql, issue 12). Only a pending, unexpired verification counts tries.
WITH failed AS (
    UPDATE verifications
       SET confirm_failures = confirm_failures + 1,
           status = CASE WHEN confirm_failures + 1 >= max_confirm_failures THEN 'locked' ELSE status END,
           updated_at = now()
     WHERE id = :id AND (channel = 'sms' OR fallback_channel = 'sms') AND expires_at > now()
       AND status NOT IN ('verified', 'expired', 'superseded', 'locked')  -- pending (confirm_link.sql: why so)
    RETURNING id, status, confirm_failures, max_confirm_failures, verifications AS verification
)
SELECT f.id, f.status, f.confirm_failures, f.max_confirm_failures,
       CASE WHEN f.status = 'locked'
            THEN (SELECT count(*) FROM suppress_undelivered_intents(ARRAY[f.id], 'locked')) ELSE 0 END
           AS suppressed,
       CASE WHEN f.status = 'locked' THEN record_event(f.verification, 'verification.locked') ELSE 0 END AS events
  FROM failed AS f
