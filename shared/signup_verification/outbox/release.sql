-- release (fenced): claimed -> eligible again, lease cleared. No send was started, so it is not
-- an attempt (graceful shutdown, budget exhausted before the send began).
UPDATE delivery_intents AS i
   SET status = CASE WHEN i.attempts = 0 THEN 'ready' ELSE 'retryable' END,
       lease_owner = NULL, lease_until = NULL, updated_at = now()
  FROM unnest(:ids::bigint[], :versions::bigint[]) AS t(id, lease_version)
 WHERE i.id = t.id AND i.lease_owner = :owner AND i.lease_version = t.lease_version
   AND i.status = 'claimed' AND i.lease_until > now()
RETURNING i.id
