-- release (fenced): a claim whose sends never started -> eligible again at once, lease cleared.
-- Not an attempt (graceful shutdown, budget exhausted or the link died before the send began):
--   claimed                       -> ready/retryable, nothing logged (no attempt was begun);
--   attempting, sending_at NULL   -> retryable, a 'released' row ends the attempt the fused claim
--                                    began (claim.sql); max_attempts + 1, so it is not charged
--                                    (its number stays used: attempt ids are Message-IDs/keys).
-- An attempt whose sends started (sending_at set) is never released: only settle ends it.
WITH input AS (
    SELECT * FROM unnest(:ids::bigint[], :versions::bigint[]) AS t(id, lease_version)
), released AS (
    UPDATE delivery_intents AS i
       SET status = CASE WHEN i.attempts = 0 THEN 'ready' ELSE 'retryable' END,
           max_attempts = i.max_attempts + (before.status = 'attempting')::integer,
           lease_owner = NULL, lease_until = NULL, updated_at = now()
      FROM input AS t, delivery_intents AS before
     WHERE i.id = t.id AND before.id = t.id AND i.lease_owner = :owner AND i.lease_version = t.lease_version
       AND (i.status = 'claimed' OR (i.status = 'attempting' AND i.sending_at IS NULL)) AND i.lease_until > now()
    RETURNING i.id, i.attempts, i.channel, i.template_version, i.lease_version, i.last_claimed_at,
              before.status = 'attempting' AS begun
), logged AS (
    INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version, lease_owner,
                                   lease_version, outcome, error_class, error_detail, claimed_at)
    SELECT r.id || ':' || r.attempts, r.id, r.attempts, r.channel, r.template_version, :owner, r.lease_version,
           'released', 'released', 'claimed ahead; released before its send started', r.last_claimed_at
      FROM released AS r
     WHERE r.begun
)
SELECT r.id FROM released AS r
