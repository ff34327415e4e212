-- claim: eligible -> claimed. One short transaction, committed before any network call.
-- Reads the shared eligibility view (SMS capped by the global budget); SKIP LOCKED lets concurrent workers take disjoint batches.
-- Returns what the worker needs to render and to fence its later writes (lease_version).
-- Shaped so the plan is index probes whatever the table sizes (bench/raw_sql_bench.py): the ids
-- as an array (primary-key probes, not a hash join over a seq scan of delivery_intents) and the
-- verification read as a LATERAL that cannot be flattened (one primary-key probe per row).
WITH other AS (
    SELECT id, next_attempt_at FROM eligible_delivery_intents WHERE channel <> 'sms'
     ORDER BY next_attempt_at, id LIMIT :limit FOR UPDATE SKIP LOCKED
), sms AS (
    -- SMS within the global budget (SMS_MAX_PER_HOUR, sql/definitions/07): past it, SMS intents
    -- are not taken at all, so they stay eligible and no attempt is charged.
    SELECT id, next_attempt_at FROM eligible_delivery_intents WHERE channel = 'sms'
     ORDER BY next_attempt_at, id
     LIMIT least(:limit, sms_budget_left(CAST(:sms_max AS integer))) FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE delivery_intents AS i
       SET status = 'claimed', lease_owner = :owner,
           lease_until = now() + make_interval(secs => :lease_seconds),
           lease_version = i.lease_version + 1, last_claimed_at = now(), updated_at = now()
     WHERE i.id = ANY (ARRAY(SELECT id FROM (SELECT * FROM other UNION ALL SELECT * FROM sms) AS pick
                              ORDER BY next_attempt_at, id LIMIT :limit))
    RETURNING i.*
)
SELECT c.id, c.verification_id, c.channel, c.purpose, c.locale, c.template_version, c.attempts,
       c.max_attempts, c.ambiguous_count, c.lease_version, c.lease_until, c.next_attempt_at, c.created_at,
       -- issue 14: a fallback intent carries its own destination (NULL once redacted, like the verification's);
       -- issue 12: a webhook event never carries one to the worker: not its to send, not its to log
       CASE WHEN c.role = 'fallback' THEN c.destination WHEN c.role = 'event' THEN NULL ELSE v.destination END
           AS destination,
       v.key_id, v.token_nonce, v.expires_at, v.status AS verification_status,
       c.role, c.event_type, c.payload
  FROM claimed AS c
 CROSS JOIN LATERAL (SELECT destination, key_id, token_nonce, expires_at, status FROM verifications
                      WHERE id = c.verification_id OFFSET 0) AS v
 ORDER BY c.next_attempt_at, c.id
