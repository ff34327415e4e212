-- consume: the one atomic UPDATE that records a code's proof (a link's is confirm_link.sql, which finds
-- and consumes in one statement: keep the two in step). A code is the SMS channel's secret, whether SMS
-- is the primary channel or the fallback, and proves the number once, in one of two ways:
-- - the first proof: a pending, unexpired verification becomes verified, its proof `verified_channel`
--   'sms', `verified_via` 'code'. Its undelivered intents are suppressed in the same statement, through
--   the shared transition (sql/definitions/03_suppress_undelivered_intents.sql), the other channel's
--   too ('verified': a fallback confirmed before its time is never sent), and the
--   `verification.verified` webhook event is recorded (sql/definitions/10_record_event.sql);
-- - a later proof (sql/027): a verification its email's link verified, still unexpired, whose code has
--   not proved the number yet and has wrong tries left: `second_proof_at`. Nothing is left to suppress.
-- Either way the `verification.proved` event is recorded, its subject the channel proved. The UPDATE
-- requires the digest the caller matched and one of those two states, so of two concurrent
-- confirmations with this code exactly one returns a row.
WITH consumed AS (
    UPDATE verifications AS v
       SET status = 'verified',
           verified_at = CASE WHEN v.status = 'verified' THEN v.verified_at ELSE now() END,
           verified_channel = CASE WHEN v.status = 'verified' THEN v.verified_channel ELSE 'sms' END,
           verified_via = CASE WHEN v.status = 'verified' THEN v.verified_via ELSE 'code' END,
           second_proof_at = CASE WHEN v.status = 'verified' THEN now() END,
           updated_at = now()
     WHERE v.id = :id AND (v.token_digest = :digest OR v.fallback_digest = :digest) AND v.expires_at > now()
       -- pending, written so it implies no partial index (confirm_link.sql says why), or the later proof
       AND (v.status NOT IN ('verified', 'expired', 'superseded', 'locked')
            OR (v.status = 'verified' AND v.verified_channel = 'email' AND v.second_proof_at IS NULL
                AND v.confirm_failures < v.max_confirm_failures))
    RETURNING v.id, v.account_id, v.verified_at, v.verified_channel, v.verified_via, v.second_proof_at,
              v AS verification
)
SELECT c.id, c.account_id, c.verified_at, c.verified_channel, c.verified_via, c.second_proof_at,
       CASE WHEN c.second_proof_at IS NULL
            THEN (SELECT count(*) FROM suppress_undelivered_intents(ARRAY[c.id], 'verified')) ELSE 0 END AS suppressed,
       CASE WHEN c.second_proof_at IS NULL THEN record_event(c.verification, 'verification.verified') ELSE 0 END
       + record_event(c.verification, 'verification.proved',
                      jsonb_build_object('proof', jsonb_build_object(
                          'channel', 'sms', 'via', 'code', 'at', rfc3339(coalesce(c.second_proof_at, c.verified_at)))),
                      'sms') AS events
  FROM consumed AS c
