-- The read API (verifications/read.py): one file of the verifications package's named statements
-- (platform/catalogue.py).

-- name: read
-- GET /<verification_id> on create_verification (verifications/read.py): the verification as its site
-- may see it, its proofs (verifications/proofs.py: from the verified_* columns and second_proof_at) and
-- its message deliveries (the verification's steps, in order: intents are written in step order), in one statement. Never the nonce, the digest, a token or a code (key_id
-- names the key the code-entry page's handle is made with); the destination is masked in Python. Event intents (role 'event', the webhooks to the site
-- itself) are not deliveries of the message: they never show here. A pending verification past its
-- expiry reads as expired: expires_at is the truth, the status catches up at the reconciler's sweep.
-- A delivery's status is its intent's, told apart where the provider's reports said more:
-- `delivered` (accepted, then reported delivered) and `undeliverable` (accepted, then reported
-- failed for good). Its reason is the recorded verdict (failure_*), or `expired` for a delivery whose
-- link died before it could be sent.
-- The code-entry page's state (verifications/entry.py: `code_entry_url` only while it asks for a
-- code): the stored status and expiry, the tries, and the steps' sends (`sent_channels`,
-- `ended_unsent_channels`) as confirm_state reads them, from the same view (step_sends).
SELECT v.id, v.account_id, v.channel, v.destination, v.return_url, v.key_id, v.fallback_channel, v.step3_channel,
       v.status AS stored_status, v.expires_at AS expires_ts, now() AS db_now, v.confirm_failures,
       v.max_confirm_failures, steps.sent_channels, steps.ended_unsent_channels,
       CASE WHEN v.status = 'pending' AND v.expires_at <= now() THEN 'expired' ELSE v.status END AS status,
       rfc3339(v.created_at) AS created_at, rfc3339(v.expires_at) AS expires_at,
       rfc3339(v.verified_at) AS verified_at, v.verified_channel, v.verified_via,
       rfc3339(v.second_proof_at) AS second_proof_at, v.second_proof_channel,
       rfc3339(v.third_proof_at) AS third_proof_at,
       coalesce((
           SELECT jsonb_agg(jsonb_build_object(
                      'channel', i.channel,
                      'role', i.role,
                      -- when the step is due unless proved first (or brought forward): the first at once
                      'after_seconds', CASE WHEN i.role = 'primary' THEN 0 ELSE i.after_seconds END,
                      -- a later step's own destination, masked in Python; a primary's is the verification's
                      'destination', coalesce(i.destination, v.destination),
                      'status', CASE WHEN i.status = 'accepted' AND i.delivered_at IS NOT NULL THEN 'delivered'
                                     WHEN i.status = 'failed' AND i.undeliverable_reason IS NOT NULL THEN 'undeliverable'
                                     ELSE i.status END,
                      'attempts', i.attempts,
                      'last_outcome', (SELECT a.outcome FROM delivery_attempts AS a
                                        WHERE a.intent_id = i.id ORDER BY a.id DESC LIMIT 1),
                      'accepted_at', CASE WHEN i.status = 'accepted'
                                               OR (i.status = 'failed' AND i.undeliverable_reason IS NOT NULL)
                                          THEN rfc3339(i.completed_at) END,
                      'delivered_at', rfc3339(i.delivered_at),
                      'failed_at', CASE WHEN i.status = 'failed' THEN rfc3339(coalesce(i.failed_at, i.completed_at)) END,
                      'reason', CASE WHEN i.status = 'failed'
                                     THEN jsonb_build_object('category', coalesce(i.failure_category, 'unknown'),
                                                             'code', i.failure_code, 'provider', i.failure_provider,
                                                             'fault', coalesce(i.failure_fault, 'transient_or_unknown'))
                                     WHEN i.status = 'suppressed' AND i.suppression_reason IN ('expired', 'redacted')
                                     THEN jsonb_build_object('category', 'expired', 'code', NULL, 'provider', NULL,
                                                             'fault', 'transient_or_unknown') END)
                      ORDER BY i.id)
             FROM delivery_intents AS i
            WHERE i.verification_id = v.id AND i.role <> 'event'), '[]'::jsonb) AS deliveries
  FROM verifications AS v
 CROSS JOIN LATERAL (
     SELECT coalesce(array_agg(s.channel) FILTER (WHERE s.may_have_reached), '{}') AS sent_channels,
            coalesce(array_agg(s.channel) FILTER (WHERE s.ended_unsent), '{}') AS ended_unsent_channels
       FROM step_sends AS s
      WHERE s.verification_id = v.id) AS steps
 WHERE v.id = :id
