-- The outbox's statements a worker runs to take work and hold it: claim, begin, start, renew, and the
-- claim-time suppression: one file of the outbox package's named statements (platform/catalogue.py).

-- name: claim
-- transition: ready, retryable -> claimed, attempting
-- why: claim (fenced from here on): a live intent is begun in the same statement
-- claim: eligible -> claimed, or with :begin straight to attempting (the fused claim).
-- One short transaction, committed before any network call.
-- Reads the shared eligibility view (SMS and WhatsApp capped by the global SMS budget, calls by theirs); SKIP LOCKED lets concurrent workers take disjoint batches.
-- Returns what the worker needs to render and to fence its later writes (lease_version), nothing
-- more: each column costs the worker ~0.7 us per intent to decode (pg8000).
-- Shaped so the plan is index probes whatever the table sizes (bench/raw_sql_bench.py): the ids
-- as an array (primary-key probes, not a hash join over a seq scan of delivery_intents) and the
-- verification read as a LATERAL that cannot be flattened (one primary-key probe per row).
-- With :begin, an intent whose link is alive for :dead_within seconds more is begun in this
-- statement (attempts + 1 and its 'attempting' row, as outbox/queries/claim.sql:begin_attempts does): one UPDATE and one
-- round trip fewer per intent. Its sends have not started (sending_at stays NULL until outbox/queries/claim.sql:start),
-- so if they never do, outbox/queries/settle.sql:release / outbox/queries/reconcile.sql:expire_claims record 'released', not an attempt. The
-- others stay 'claimed' for the worker's own dead-link check (delivery/dispatcher.py), which
-- suppresses them or begins them the two-step way. `live` below must never call alive what
-- ClaimedIntent.dead_reason calls dead.
-- One ordered range of the eligible index (channel, next_attempt_at, id) per channel, merged in
-- claim order: a branch per channel of the delivery_intents channel CHECK (a new channel adds one).
-- Each branch takes at most its channel's own limit (the worker sizes it from the channel's latency,
-- its sends in flight and its provider rate: delivery/batch_sizing.py); :limit bounds the merged batch.
-- A held message channel (a run of account faults, record_sender_faults, channel_held) or a slowed one (its
-- provider answered 429, channel_slowed) is not taken at all: its intents stay eligible, none is
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
    -- SMS within the global budget (SMS_MAX_PER_HOUR, sms_budget_left): past it, SMS intents
    -- are not taken at all, so they stay eligible and no attempt is charged.
    SELECT id, next_attempt_at FROM eligible_delivery_intents WHERE channel = 'sms'
     ORDER BY next_attempt_at, id
     LIMIT CASE WHEN channel_held('sms') OR channel_slowed('sms') THEN 0
                ELSE least(:sms_limit, sms_budget_left(CAST(:sms_max AS integer))) END
       FOR UPDATE SKIP LOCKED
), whatsapp AS (
    -- WhatsApp counts in the same budget as SMS (sms_budget_left): what the SMS branch took first is
    -- spent, so the two together never take more than the budget left
    SELECT id, next_attempt_at FROM eligible_delivery_intents WHERE channel = 'whatsapp'
     ORDER BY next_attempt_at, id
     LIMIT CASE WHEN channel_held('whatsapp') OR channel_slowed('whatsapp') THEN 0
                WHEN CAST(:sms_max AS integer) IS NULL THEN :whatsapp_limit
                ELSE least(:whatsapp_limit,
                           greatest(0, sms_budget_left(CAST(:sms_max AS integer)) - (SELECT count(*) FROM sms))) END
       FOR UPDATE SKIP LOCKED
), voice AS (
    -- calls within their own budget (VOICE_MAX_PER_HOUR, voice_budget_left), as SMS within theirs
    SELECT id, next_attempt_at FROM eligible_delivery_intents WHERE channel = 'voice'
     ORDER BY next_attempt_at, id
     LIMIT CASE WHEN channel_held('voice') OR channel_slowed('voice') THEN 0
                ELSE least(:voice_limit, voice_budget_left(CAST(:voice_max AS integer))) END
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
                                              UNION ALL SELECT * FROM sms UNION ALL SELECT * FROM whatsapp
                                              UNION ALL SELECT * FROM voice) AS pick
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
       c.role, c.event_type, c.event_subject, c.payload,
       c.status = 'attempting' AS begun, rh.held_until AS route_held_until
  FROM claimed AS c
 CROSS JOIN LATERAL (SELECT destination, key_id, token_nonce, expires_at, status FROM verifications
                      WHERE id = c.verification_id OFFSET 0) AS v
  LEFT JOIN route_held AS rh ON rh.intent_id = c.id
 ORDER BY c.next_attempt_at, c.id

-- name: begin_attempts
-- transition: claimed -> attempting
-- why: begin the attempt of a claimed intent
-- begin attempt (fenced): claimed -> attempting, attempts + 1, and the attempt row appended in the
-- same statement, before the network call. The attempt id '<intent>:<n>' is stable: it is the
-- provider idempotency key / Message-ID where the channel has one. Its sends start right after it
-- (sending_at set): the fused claim (outbox/queries/claim.sql:claim with begin) does the same in two steps, begin, then outbox/queries/claim.sql:start.
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

-- name: start
-- start (fenced): the sends of attempts the fused claim began are handed over now. From here a lost
-- lease means a send may have happened (outbox/queries/reconcile.sql:lose_leases: ambiguous), and only settle ends the
-- attempt. Only sending_at and updated_at change (neither indexed, status and lease untouched):
-- a HOT update, no index entries, unlike the two-step begin it replaces.
UPDATE delivery_intents AS i
   SET sending_at = now(), updated_at = now()
  FROM unnest(:ids::bigint[], :versions::bigint[]) AS t(id, lease_version)
 WHERE i.id = t.id AND i.lease_owner = :owner AND i.lease_version = t.lease_version
   AND i.status = 'attempting' AND i.sending_at IS NULL AND i.lease_until > now()
RETURNING i.id, i.id || ':' || i.attempts, i.attempts

-- name: renew
-- renew (fenced): extend a current lease for a send that runs long. An expired lease is not revived.
UPDATE delivery_intents AS i
   SET lease_until = now() + make_interval(secs => :lease_seconds), updated_at = now()
  FROM unnest(:ids::bigint[], :versions::bigint[]) AS t(id, lease_version)
 WHERE i.id = t.id AND i.lease_owner = :owner AND i.lease_version = t.lease_version
   AND i.status IN ('claimed', 'attempting') AND i.lease_until > now()
RETURNING i.id, i.lease_until

-- name: suppress
-- suppress: the undelivered intents of dead verifications become suppressed with the reason
-- (the shared function of suppress_undelivered_intents, which create uses too). Returns the suppressed intent ids.
SELECT suppress_undelivered_intents(:ids::uuid[], :reason)
