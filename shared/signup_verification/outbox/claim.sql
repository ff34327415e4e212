-- claim: eligible -> claimed, or with :begin straight to attempting (the fused claim).
-- One short transaction, committed before any network call.
-- Reads the shared eligibility view (SMS capped by the global budget); SKIP LOCKED lets concurrent workers take disjoint batches.
-- Returns what the worker needs to render and to fence its later writes (lease_version), nothing
-- more: each column costs the worker ~0.7 us per intent to decode (pg8000).
-- Shaped so the plan is index probes whatever the table sizes (bench/raw_sql_bench.py): the ids
-- as an array (primary-key probes, not a hash join over a seq scan of delivery_intents) and the
-- verification read as a LATERAL that cannot be flattened (one primary-key probe per row).
-- With :begin, an intent whose link is alive for :dead_within seconds more is begun in this
-- statement (attempts + 1 and its 'attempting' row, as begin_attempts.sql does): one UPDATE and one
-- round trip fewer per intent. Its sends have not started (sending_at stays NULL until start.sql),
-- so if they never do, release.sql / expire_claims.sql record 'released', not an attempt. The
-- others stay 'claimed' for the worker's own dead-link check (delivery/dispatcher.py), which
-- suppresses them or begins them the two-step way. `live` below must never call alive what
-- ClaimedIntent.dead_reason calls dead.
-- One ordered range of the eligible index (channel, next_attempt_at, id) per channel, merged in
-- claim order: a branch per channel of the delivery_intents channel CHECK (a new channel adds one).
-- Each branch takes at most its channel's own limit (the worker sizes it from the channel's latency,
-- its sends in flight and its provider rate: delivery/batch_sizing.py); :limit bounds the merged batch.
-- A held message channel (a run of account faults, sql/definitions/19-20) or a slowed one (its
-- provider answered 429, sql/definitions/23) is not taken at all: its intents stay eligible, none is
-- failed or charged an attempt. A held route (route faults from several destinations: one SMS
-- destination country, one email receiving domain) is narrower than the claim's ranges: while any
-- route is held (one look for the whole statement), each claimed intent carries when its route's
-- hold ends, and the worker leaves it unsent until then (delivery/sending.py). Otherwise no route is
-- looked up.
WITH email AS (
    SELECT id, next_attempt_at FROM eligible_delivery_intents WHERE channel = 'email'
     ORDER BY next_attempt_at, id
     LIMIT CASE WHEN channel_held('email') OR channel_slowed('email') THEN 0 ELSE :email_limit END
       FOR UPDATE SKIP LOCKED
), webhook AS (
    SELECT id, next_attempt_at FROM eligible_delivery_intents WHERE channel = 'webhook'
     ORDER BY next_attempt_at, id LIMIT CASE WHEN channel_slowed('webhook') THEN 0 ELSE :webhook_limit END
       FOR UPDATE SKIP LOCKED
), sms AS (
    -- SMS within the global budget (SMS_MAX_PER_HOUR, sql/definitions/07): past it, SMS intents
    -- are not taken at all, so they stay eligible and no attempt is charged.
    SELECT id, next_attempt_at FROM eligible_delivery_intents WHERE channel = 'sms'
     ORDER BY next_attempt_at, id
     LIMIT CASE WHEN channel_held('sms') OR channel_slowed('sms') THEN 0
                ELSE least(:sms_limit, sms_budget_left(CAST(:sms_max AS integer))) END
       FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE delivery_intents AS i
       SET (status, attempts) = (
               SELECT CASE WHEN live THEN 'attempting' ELSE 'claimed' END, i.attempts + live::integer
                 FROM (SELECT coalesce(CAST(:begin AS boolean) AND (i.role = 'event'  -- an event has no link: never dead
                                       OR (v.status = 'pending'
                                       AND CASE WHEN i.role = 'fallback' THEN i.destination ELSE v.destination END IS NOT NULL
                                       AND v.expires_at > now() + make_interval(secs => :dead_within))), false) AS live
                         FROM verifications AS v WHERE v.id = i.verification_id) AS l),
           lease_owner = :owner,
           lease_until = now() + make_interval(secs => :lease_seconds),
           lease_version = i.lease_version + 1, last_claimed_at = now(), updated_at = now(), sending_at = NULL
     WHERE i.id = ANY (ARRAY(SELECT id FROM (SELECT * FROM email UNION ALL SELECT * FROM webhook
                                              UNION ALL SELECT * FROM sms) AS pick
                              ORDER BY next_attempt_at, id LIMIT :limit))
    RETURNING i.*
), route_held AS (
    -- while any route is held (one look for the statement, a one-time filter), each claimed intent's
    -- route: delivery_route inlined per row, three primary-key probes
    SELECT r.intent_id, h.held_until
      FROM claimed AS c
     CROSS JOIN LATERAL (SELECT * FROM delivery_route(c.id) OFFSET 0) AS r
      JOIN channel_holds AS h ON h.channel = r.channel AND h.route = r.route
     WHERE (SELECT routes_held()) AND h.held_until > now()
), begun AS (
    INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version,
                                   lease_owner, lease_version, outcome, claimed_at, attempted_at)
    SELECT c.id || ':' || c.attempts, c.id, c.attempts, c.channel, c.template_version,
           :owner, c.lease_version, 'attempting', c.last_claimed_at, now()
      FROM claimed AS c
     WHERE c.status = 'attempting'
)
SELECT c.id, c.verification_id, c.channel, c.locale, c.template_version, c.attempts,
       c.ambiguous_count, c.lease_version, c.lease_until, c.created_at,
       -- a fallback intent carries its own destination (NULL once redacted, like the verification's);
       -- a webhook event never carries one to the worker: not its to send, not its to log
       CASE WHEN c.role = 'fallback' THEN c.destination WHEN c.role = 'event' THEN NULL ELSE v.destination END
           AS destination,
       v.key_id, v.token_nonce, v.expires_at, v.status AS verification_status,
       v.link_by_digest,  -- sql/016: an old-style link (the token alone) during its grace day
       c.role, c.event_type, c.event_subject, c.payload,
       c.status = 'attempting' AS begun, rh.held_until AS route_held_until
  FROM claimed AS c
 CROSS JOIN LATERAL (SELECT destination, key_id, token_nonce, expires_at, status, link_by_digest FROM verifications
                      WHERE id = c.verification_id OFFSET 0) AS v
  LEFT JOIN route_held AS rh ON rh.intent_id = c.id
 ORDER BY c.next_attempt_at, c.id
