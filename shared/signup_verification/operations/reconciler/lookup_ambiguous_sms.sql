-- Ambiguous SMS to look up at Twilio: the intent, its last begun attempt and the
-- destination (never logged; a fallback intent has its own). Oldest hold first; redacted destinations cannot be looked up.
SELECT i.id AS intent_id, a.attempt_id, a.attempted_at, coalesce(i.destination, v.destination) AS destination
  FROM delivery_intents AS i
  JOIN verifications AS v ON v.id = i.verification_id
  JOIN delivery_attempts AS a ON a.intent_id = i.id AND a.attempt_number = i.attempts AND a.outcome = 'attempting'
 WHERE i.status = 'ambiguous' AND i.channel = 'sms' AND coalesce(i.destination, v.destination) IS NOT NULL
 ORDER BY i.next_attempt_at, i.id
 LIMIT :limit
