-- verifyctl inspect: the webhook events of one verification, each with its attempt log
-- (the same append-only rows as a message's), oldest first. The payload holds no secret or destination.
SELECT i.id, i.event_type, i.event_subject, i.status, i.attempts, i.max_attempts, i.ambiguous_count, i.next_attempt_at,
       i.last_error, i.created_at, i.completed_at,
       coalesce((SELECT jsonb_agg(jsonb_build_object(
                     'attempt_id', a.attempt_id, 'outcome', a.outcome, 'error_class', a.error_class,
                     'error_detail', a.error_detail, 'observed_at', a.observed_at) ORDER BY a.id)
                   FROM delivery_attempts AS a WHERE a.intent_id = i.id), '[]'::jsonb) AS attempt_log
  FROM delivery_intents AS i
 WHERE i.verification_id = :verification_id AND i.role = 'event'
 ORDER BY i.id
