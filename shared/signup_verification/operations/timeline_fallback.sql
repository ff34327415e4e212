-- verifyctl inspect: the verification's fallback delivery intent, if its channel policy has one.
SELECT i.id, i.channel, i.destination, i.policy, i.after_seconds, i.status, i.attempts, i.max_attempts,
       i.next_attempt_at, i.brought_forward_at, i.suppression_reason, i.last_error, i.provider_ref,
       i.created_at, i.completed_at, i.last_claimed_at, i.lease_owner, i.lease_version, i.delivered_at,
       i.failed_at, i.failure_category, i.failure_code, i.failure_provider, i.failure_fault,
       (SELECT p.completed_at FROM delivery_intents AS p
         WHERE p.verification_id = i.verification_id AND p.role = 'primary' AND p.status = 'failed') AS primary_failed_at
  FROM delivery_intents AS i
 WHERE i.verification_id = :verification_id AND i.role = 'fallback'
