-- GET /<verification_id> on create_verification (verifications/read.py): the verification as its site
-- may see it, and its message deliveries, in one statement. Never the nonce, the digest, a token or a
-- code; the destination is masked in Python. Event intents (role 'event', the webhooks to the site
-- itself) are not deliveries of the message: they never show here. A pending verification past its
-- expiry reads as expired: expires_at is the truth, the status catches up at the reconciler's sweep.
SELECT v.id, v.account_id, v.channel, v.destination, v.return_url,
       CASE WHEN v.status = 'pending' AND v.expires_at <= now() THEN 'expired' ELSE v.status END AS status,
       to_char(v.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_at,
       to_char(v.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS expires_at,
       to_char(v.verified_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS verified_at,
       coalesce((
           SELECT jsonb_agg(jsonb_build_object(
                      'channel', i.channel,
                      'role', i.role,
                      -- a fallback's own destination (sql/011), masked in Python; a primary's is the verification's
                      'destination', coalesce(i.destination, v.destination),
                      'status', i.status,
                      'attempts', i.attempts,
                      'last_outcome', (SELECT a.outcome FROM delivery_attempts AS a
                                        WHERE a.intent_id = i.id ORDER BY a.id DESC LIMIT 1),
                      'accepted_at', CASE WHEN i.status = 'accepted' THEN
                          to_char(i.completed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') END)
                      ORDER BY i.id)
             FROM delivery_intents AS i
            WHERE i.verification_id = v.id AND i.role <> 'event'), '[]'::jsonb) AS deliveries
  FROM verifications AS v
 WHERE v.id = :id
