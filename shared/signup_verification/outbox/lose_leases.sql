-- lease lost: attempting with an expired lease -> ambiguous (a send may have happened), held per
-- the channel's policy, with an attempt row recording the lost lease. Only once its sends started
-- (sending_at): an attempt the fused claim began whose sends never started is released instead.
WITH policy AS (
    SELECT * FROM unnest(:channels::text[], :holds::float8[]) AS p(channel, hold_seconds)
), lost AS (
    SELECT id FROM delivery_intents
     WHERE status = 'attempting' AND lease_until <= now() AND sending_at IS NOT NULL  -- else: expire_claims.sql
     ORDER BY lease_until
     LIMIT :limit
       FOR UPDATE SKIP LOCKED
), moved AS (
    UPDATE delivery_intents AS i
       SET status = 'ambiguous', lease_owner = NULL, lease_until = NULL,
           next_attempt_at = now() + make_interval(secs => coalesce(p.hold_seconds, 0)),
           ambiguous_count = i.ambiguous_count + 1,
           last_error = 'lease_lost: the worker stopped after starting the send', updated_at = now()
      FROM lost AS l, delivery_intents AS before
      LEFT JOIN policy AS p ON p.channel = before.channel
     WHERE i.id = l.id AND before.id = l.id
    RETURNING i.id, i.attempts, i.channel, i.template_version, before.lease_owner, i.lease_version, i.last_claimed_at
)
INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version, lease_owner,
                               lease_version, outcome, error_class, error_detail, claimed_at)
SELECT m.id || ':' || m.attempts, m.id, m.attempts, m.channel, m.template_version, m.lease_owner,
       m.lease_version, 'ambiguous', 'lease_lost', 'lease expired while attempting', m.last_claimed_at
  FROM moved AS m
RETURNING intent_id, channel
