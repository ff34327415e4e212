-- renew (fenced): extend a current lease for a send that runs long. An expired lease is not revived.
UPDATE delivery_intents AS i
   SET lease_until = now() + make_interval(secs => :lease_seconds), updated_at = now()
  FROM unnest(:ids::bigint[], :versions::bigint[]) AS t(id, lease_version)
 WHERE i.id = t.id AND i.lease_owner = :owner AND i.lease_version = t.lease_version
   AND i.status IN ('claimed', 'attempting') AND i.lease_until > now()
RETURNING i.id, i.lease_until
