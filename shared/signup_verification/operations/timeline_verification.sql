-- verifyctl inspect: the verification, its proofs (verifications/proofs.py) and its (primary) delivery
-- intent (never the nonce or the digest); a fallback intent is read by timeline_fallback.sql.
SELECT v.id, v.account_id, v.channel, v.destination, v.purpose, v.locale, v.status, v.expires_at,
       v.created_at, v.updated_at, v.verified_at, v.verified_channel, v.verified_via, v.second_proof_at,
       v.redacted_at, v.superseded_by, v.confirm_failures, v.fallback_channel,
       (SELECT f.destination FROM delivery_intents AS f
         WHERE f.verification_id = v.id AND f.role = 'fallback') AS fallback_destination,
       i.id AS intent_id, i.status AS intent_status, i.template_version, i.attempts, i.max_attempts,
       i.ambiguous_count, i.lease_owner, i.lease_until, i.lease_version, i.next_attempt_at, i.last_error,
       i.provider_ref, i.suppression_reason, i.created_at AS intent_created_at, i.last_claimed_at,
       i.completed_at, i.updated_at AS intent_updated_at, i.delivered_at, i.failed_at, i.failure_category,
       i.failure_code, i.failure_provider, i.failure_fault, i.undeliverable_reason
  FROM verifications AS v
  -- its message intent (webhook events: timeline_events.sql)
  LEFT JOIN delivery_intents AS i ON i.verification_id = v.id AND i.role = 'primary'
 WHERE v.id = :verification_id
