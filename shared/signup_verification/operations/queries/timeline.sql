-- A verification's timeline (operations/timeline*.py): one file of the operations package's named
-- statements (platform/catalogue.py).

-- name: timeline_verification
-- verifyctl inspect: the verification, its proofs (verifications/proofs.py) and its (primary) delivery
-- intent (never the nonce or the digest); the later steps' intents are read by operations/queries/timeline.sql:timeline_fallback.
SELECT v.id, v.account_id, v.channel, v.destination, v.purpose, v.locale, v.status, v.expires_at,
       v.created_at, v.updated_at, v.verified_at, v.verified_channel, v.verified_via, v.second_proof_at,
       v.second_proof_channel, v.third_proof_at,
       v.redacted_at, v.superseded_by, v.confirm_failures, v.fallback_channel, v.step3_channel,
       (SELECT f.destination FROM delivery_intents AS f  -- a step's channel names it
         WHERE f.verification_id = v.id AND f.channel = v.fallback_channel AND f.role = 'fallback') AS fallback_destination,
       (SELECT f.destination FROM delivery_intents AS f
         WHERE f.verification_id = v.id AND f.channel = v.step3_channel AND f.role = 'fallback') AS step3_destination,
       i.id AS intent_id, i.status AS intent_status, i.template_version, i.attempts, i.max_attempts,
       i.ambiguous_count, i.lease_owner, i.lease_until, i.lease_version, i.next_attempt_at, i.last_error,
       i.provider_ref, i.suppression_reason, i.created_at AS intent_created_at, i.last_claimed_at,
       i.completed_at, i.updated_at AS intent_updated_at, i.delivered_at, i.failed_at, i.failure_category,
       i.failure_code, i.failure_provider, i.failure_fault, i.undeliverable_reason
  FROM verifications AS v
  -- its message intent (webhook events: operations/queries/timeline.sql:timeline_events)
  LEFT JOIN delivery_intents AS i ON i.verification_id = v.id AND i.role = 'primary'
 WHERE v.id = :verification_id

-- name: timeline_attempts
-- verifyctl inspect: the attempt log of one intent, in the order it was written.
SELECT attempt_id, attempt_number, outcome, lease_owner, lease_version, error_class, error_detail,
       provider_ref, segments, claimed_at, attempted_at, observed_at
  FROM delivery_attempts
 WHERE intent_id = :intent_id
 ORDER BY id

-- name: timeline_events
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

-- name: timeline_reports
-- verifyctl inspect: the provider reports about one verification's deliveries, in order.
SELECT o.provider, o.event, o.detail, o.error_code, o.permanent, o.attempt_id, o.provider_at, o.received_at
  FROM delivery_observations AS o
  JOIN delivery_intents AS i ON i.id = o.intent_id
 WHERE i.verification_id = :verification_id
 ORDER BY o.id

-- name: timeline_fallback
-- verifyctl inspect: the verification's later steps' delivery intents (the fallback, step 3), in step order.
SELECT i.id, intent_step(i.verification_id, i.id) AS step, i.channel, i.destination, i.policy, i.after_seconds, i.status, i.attempts, i.max_attempts,
       i.next_attempt_at, i.brought_forward_at, i.suppression_reason, i.last_error, i.provider_ref,
       i.created_at, i.completed_at, i.last_claimed_at, i.lease_owner, i.lease_version, i.delivered_at,
       i.failed_at, i.failure_category, i.failure_code, i.failure_provider, i.failure_fault,
       (SELECT CASE WHEN p.status = 'failed' THEN p.completed_at END FROM delivery_intents AS p
         WHERE p.verification_id = i.verification_id AND p.role <> 'event' AND p.id < i.id
         ORDER BY p.id DESC LIMIT 1) AS previous_failed_at  -- the step before it, when it failed for good
  FROM delivery_intents AS i
 WHERE i.verification_id = :verification_id AND i.role = 'fallback'
 ORDER BY i.id
