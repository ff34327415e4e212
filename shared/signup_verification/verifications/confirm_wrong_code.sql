-- A wrong SMS code: counted atomically, whatever the verification's state, so guessing against a
-- finished verification costs the same budgets (its own count, and the destination's daily budget,
-- which sums these counts: confirm_destination_failures.sql). Only a pending, unexpired verification
-- changes state: the attempt that reaches the limit locks it, suppresses what it had left to send
-- (every channel) and records the `verification.locked` webhook event (sql/definitions/10); both
-- are no-ops for a verification locked before.
WITH failed AS (
    UPDATE verifications
       SET confirm_failures = confirm_failures + 1,
           status = CASE WHEN status NOT IN ('verified', 'expired', 'superseded', 'locked') AND expires_at > now()
                              AND confirm_failures + 1 >= max_confirm_failures
                         THEN 'locked' ELSE status END,
           updated_at = now()
     WHERE id = :id AND (channel = 'sms' OR fallback_channel = 'sms')
    RETURNING id, status, confirm_failures, max_confirm_failures, verifications AS verification
)
SELECT f.id, f.status, f.confirm_failures, f.max_confirm_failures,
       CASE WHEN f.status = 'locked'
            THEN (SELECT count(*) FROM suppress_undelivered_intents(ARRAY[f.id], 'locked')) ELSE 0 END
           AS suppressed,
       CASE WHEN f.status = 'locked' THEN record_event(f.verification, 'verification.locked') ELSE 0 END AS events
  FROM failed AS f
