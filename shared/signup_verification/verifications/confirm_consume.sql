-- consume: the one atomic UPDATE that verifies a code (a link verifies in confirm_link.sql, which finds
-- and consumes in one statement: keep the two in step). It requires the verification pending, unexpired
-- and the digest the caller matched, so of two concurrent confirmations exactly one returns a row.
-- A code is the SMS channel's secret, whether SMS is the primary channel or the fallback: the proof
-- recorded is `verified_channel` 'sms', `verified_via` 'code'.
-- Undelivered intents of the now verified verification are suppressed in the same statement
-- (nothing left to send), through the shared transition (sql/definitions/03_suppress_undelivered_intents.sql),
-- the other channel's too ('verified': a fallback confirmed before its time is never sent); the
-- `verification.verified` webhook event is recorded (sql/definitions/10_record_event.sql).
WITH consumed AS (
    UPDATE verifications
       SET status = 'verified', verified_at = now(), verified_channel = 'sms', verified_via = 'code',
           updated_at = now()
     WHERE id = :id AND (token_digest = :digest OR fallback_digest = :digest) AND expires_at > now()
       -- pending, written so it implies no partial index (confirm_link.sql says why)
       AND status NOT IN ('verified', 'expired', 'superseded', 'locked')
    RETURNING id, account_id, verified_at, verified_channel, verified_via, verifications AS verification
)
SELECT c.id, c.account_id, c.verified_at, c.verified_channel, c.verified_via,
       (SELECT count(*) FROM suppress_undelivered_intents(ARRAY[c.id], 'verified')) AS suppressed,
       record_event(c.verification, 'verification.verified') AS events
  FROM consumed AS c
