-- suppress: undelivered intents of verifications that are no longer pending, or past expiry,
-- through the shared suppress transition (sql/definitions/03_suppress_undelivered_intents.sql). Expired pending verifications are marked first.
-- Rows: (reason, intent id, NULL) per suppressed intent, then one (NULL, NULL, n) with the number of
-- verifications marked expired (a batch can expire verifications whose intents already finished).
-- Each verification marked expired records its `verification.expired` webhook event in this statement
-- (sql/definitions/10_record_event.sql); webhook events are never dead (they report the end).
WITH expired AS (
    UPDATE verifications SET status = 'expired', updated_at = now()
     WHERE id IN (SELECT id FROM verifications WHERE status = 'pending' AND expires_at <= now()
                  ORDER BY expires_at LIMIT :limit)
    RETURNING id, verifications AS verification
), dead AS (
    SELECT i.verification_id,
           CASE WHEN v.status = 'pending' OR e.id IS NOT NULL THEN 'expired' ELSE v.status END AS reason
      FROM (  -- the undelivered set, one branch per partial index: never a scan of the history
            SELECT verification_id FROM delivery_intents WHERE status IN ('ready', 'retryable') AND role <> 'event'
            UNION ALL
            SELECT verification_id FROM delivery_intents WHERE status = 'claimed' AND role <> 'event'
            UNION ALL
            SELECT verification_id FROM delivery_intents WHERE status = 'ambiguous' AND role <> 'event'
           ) AS i
      JOIN verifications AS v ON v.id = i.verification_id
      LEFT JOIN expired AS e ON e.id = i.verification_id
     WHERE v.status <> 'pending' OR v.expires_at <= now() OR e.id IS NOT NULL
     LIMIT :limit
)
SELECT d.reason, s.id, NULL::bigint AS verifications_expired
  FROM dead AS d, LATERAL suppress_undelivered_intents(ARRAY[d.verification_id], d.reason) AS s(id)
UNION ALL
-- count() of record_event (never NULL): one per expired verification, each recording its event
SELECT NULL, NULL, count(record_event(e.verification, 'verification.expired')) FROM expired AS e
