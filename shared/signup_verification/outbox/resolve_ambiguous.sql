-- resolve ambiguous: an ambiguous intent whose hold has passed -> retryable (policy 'retry', attempts
-- left) or failed (policy 'fail', or no attempt left). Policy 'hold' channels are not passed in:
-- they stay ambiguous for the operator. A failure's reason is `unconfirmed` (it may have been sent;
-- the policy gave up on it), nobody's fault we can name.
WITH policy AS (
    SELECT * FROM unnest(:channels::text[], :policies::text[]) AS p(channel, policy)
), due AS (
    SELECT i.id, p.policy FROM delivery_intents AS i JOIN policy AS p ON p.channel = i.channel
     WHERE i.status = 'ambiguous' AND i.next_attempt_at <= now()
     ORDER BY i.next_attempt_at
     LIMIT :limit
       FOR UPDATE OF i SKIP LOCKED
), resolved AS (
    UPDATE delivery_intents AS i
       SET status = CASE WHEN d.policy = 'retry' AND i.attempts < i.max_attempts THEN 'retryable' ELSE 'failed' END,
           completed_at = CASE WHEN d.policy = 'retry' AND i.attempts < i.max_attempts THEN NULL ELSE now() END,
           last_error = CASE WHEN d.policy = 'retry' AND i.attempts < i.max_attempts
                             THEN 'ambiguous: retrying after hold' ELSE 'ambiguous: given up after hold' END,
           failed_at = CASE WHEN d.policy = 'retry' AND i.attempts < i.max_attempts THEN NULL ELSE now() END,
           failure_category = CASE WHEN d.policy = 'retry' AND i.attempts < i.max_attempts THEN NULL
                                   ELSE 'unconfirmed' END,
           failure_fault = CASE WHEN d.policy = 'retry' AND i.attempts < i.max_attempts THEN NULL
                                ELSE 'transient_or_unknown' END,
           next_attempt_at = now(), updated_at = now()
      FROM due AS d
     WHERE i.id = d.id
    RETURNING i.id, i.channel, i.status
), followed AS (
    -- what a failure for good sets off (sql/definitions/08_delivery_failed.sql), in this statement
    SELECT delivery_failed(array_agg(r.id) FILTER (WHERE r.status = 'failed'),
                           jsonb_agg(jsonb_build_object('intent_id', r.id, 'category', 'unconfirmed',
                                                        'fault', 'transient_or_unknown'))
                               FILTER (WHERE r.status = 'failed')) AS written
      FROM resolved AS r
)
SELECT r.id, r.channel, r.status FROM resolved AS r, followed
