-- GET /<verification_id> on create_verification (verifications/read.py): the verification as its site
-- may see it, its proofs (verifications/proofs.py: from the verified_* columns and second_proof_at) and
-- its message deliveries, in one statement. Never the nonce, the digest, a token or a code (key_id
-- names the key the code-entry page's handle is made with); the destination is masked in Python. Event intents (role 'event', the webhooks to the site
-- itself) are not deliveries of the message: they never show here. A pending verification past its
-- expiry reads as expired: expires_at is the truth, the status catches up at the reconciler's sweep.
-- A delivery's status is its intent's, told apart where the provider's reports said more:
-- `delivered` (accepted, then reported delivered) and `undeliverable` (accepted, then reported
-- failed for good). Its reason is the recorded verdict (failure_*), or `expired` for a delivery whose
-- link died before it could be sent.
SELECT v.id, v.account_id, v.channel, v.destination, v.return_url, v.key_id, v.fallback_channel,
       CASE WHEN v.status = 'pending' AND v.expires_at <= now() THEN 'expired' ELSE v.status END AS status,
       rfc3339(v.created_at) AS created_at, rfc3339(v.expires_at) AS expires_at,
       rfc3339(v.verified_at) AS verified_at, v.verified_channel, v.verified_via,
       rfc3339(v.second_proof_at) AS second_proof_at,
       coalesce((
           SELECT jsonb_agg(jsonb_build_object(
                      'channel', i.channel,
                      'role', i.role,
                      -- a fallback's own destination (sql/011), masked in Python; a primary's is the verification's
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
 WHERE v.id = :id
