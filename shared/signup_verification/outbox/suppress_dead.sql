-- suppress: undelivered intents of verifications that are no longer pending, or past expiry,
-- through the shared suppress transition (sql/002). Expired pending verifications are marked first.
WITH expired AS (
    UPDATE verifications SET status = 'expired', updated_at = now()
     WHERE id IN (SELECT id FROM verifications WHERE status = 'pending' AND expires_at <= now()
                  ORDER BY expires_at LIMIT :limit)
    RETURNING id
), dead AS (
    SELECT i.verification_id,
           CASE WHEN v.status = 'pending' OR e.id IS NOT NULL THEN 'expired' ELSE v.status END AS reason
      FROM delivery_intents AS i
      JOIN verifications AS v ON v.id = i.verification_id
      LEFT JOIN expired AS e ON e.id = i.verification_id
     WHERE i.status IN ('ready', 'retryable', 'claimed', 'ambiguous')
       AND (v.status <> 'pending' OR v.expires_at <= now() OR e.id IS NOT NULL)
     LIMIT :limit
)
SELECT d.reason, s.id
  FROM dead AS d, LATERAL suppress_undelivered_intents(ARRAY[d.verification_id], d.reason) AS s(id)
