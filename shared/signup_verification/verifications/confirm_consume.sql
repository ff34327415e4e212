-- consume: the one atomic UPDATE that verifies a code (a link verifies in confirm_link.sql, which finds
-- and consumes in one statement: keep the two in step). It requires the verification pending, unexpired
-- and the digest the caller matched, so of two concurrent confirmations exactly one returns a row.
-- Undelivered intents of the now verified verification are suppressed in the same statement
-- (nothing left to send), through the shared transition (sql/definitions/03_suppress_undelivered_intents.sql):
-- issue 14: the digest is either channel's secret, and the other channel's undelivered intent is
-- suppressed here too ('verified': a fallback confirmed before its time is never sent);
-- issue 12: the `verification.verified` webhook event is recorded (sql/definitions/10_record_event.sql).
WITH consumed AS (
    UPDATE verifications
       SET status = 'verified', verified_at = now(), updated_at = now()
     WHERE id = :id AND (token_digest = :digest OR fallback_digest = :digest) AND expires_at > now()
       -- pending, written so it implies no partial index (confirm_link.sql says why)
       AND status NOT IN ('verified', 'expired', 'superseded', 'locked')
    RETURNING id, account_id, verified_at, verifications AS verification
)
SELECT c.id, c.account_id, c.verified_at,
       (SELECT count(*) FROM suppress_undelivered_intents(ARRAY[c.id], 'verified')) AS suppressed,
       record_event(c.verification, 'verification.verified') AS events
  FROM consumed AS c
