-- start (fenced): the sends of attempts the fused claim began are handed over now. From here a lost
-- lease means a send may have happened (lose_leases.sql: ambiguous), and only settle ends the
-- attempt. Only sending_at and updated_at change (neither indexed, status and lease untouched):
-- a HOT update, no index entries, unlike the two-step begin it replaces.
UPDATE delivery_intents AS i
   SET sending_at = now(), updated_at = now()
  FROM unnest(:ids::bigint[], :versions::bigint[]) AS t(id, lease_version)
 WHERE i.id = t.id AND i.lease_owner = :owner AND i.lease_version = t.lease_version
   AND i.status = 'attempting' AND i.sending_at IS NULL AND i.lease_until > now()
RETURNING i.id, i.id || ':' || i.attempts, i.attempts
