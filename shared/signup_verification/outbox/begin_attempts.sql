-- begin attempt (fenced): claimed -> attempting, attempts + 1, and the attempt row appended in the
-- same statement, before the network call. The attempt id '<intent>:<n>' is stable: it is the
-- provider idempotency key / Message-ID where the channel has one. Its sends start right after it
-- (sending_at set): the fused claim (claim.sql with begin) does the same in two steps, begin, then start.sql.
WITH input AS (
    SELECT * FROM unnest(:ids::bigint[], :versions::bigint[]) AS t(id, lease_version)
), begun AS (
    UPDATE delivery_intents AS i
       SET status = 'attempting', attempts = i.attempts + 1, sending_at = now(), updated_at = now()
      FROM input AS t
     WHERE i.id = t.id AND i.lease_owner = :owner AND i.lease_version = t.lease_version
       AND i.status = 'claimed' AND i.lease_until > now()
    RETURNING i.id, i.attempts, i.channel, i.template_version, i.lease_version, i.last_claimed_at
)
INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version,
                               lease_owner, lease_version, outcome, claimed_at, attempted_at)
SELECT b.id || ':' || b.attempts, b.id, b.attempts, b.channel, b.template_version,
       :owner, b.lease_version, 'attempting', b.last_claimed_at, now()
  FROM begun AS b
RETURNING intent_id, attempt_id, attempt_number
