-- The outbox package's named statements (platform/catalogue.py).

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
-- statement (attempts + 1 and its 'attempting' row, as outbox/queries.sql:begin_attempts does): one UPDATE and one
-- round trip fewer per intent. Its sends have not started (sending_at stays NULL until outbox/queries.sql:start),
-- so if they never do, outbox/queries.sql:release / outbox/queries.sql:expire_claims record 'released', not an attempt. The
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
-- (sending_at set): the fused claim (outbox/queries.sql:claim with begin) does the same in two steps, begin, then outbox/queries.sql:start.
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
-- lease means a send may have happened (outbox/queries.sql:lose_leases: ambiguous), and only settle ends the
-- attempt. Only sending_at and updated_at change (neither indexed, status and lease untouched):
-- a HOT update, no index entries, unlike the two-step begin it replaces.
UPDATE delivery_intents AS i
   SET sending_at = now(), updated_at = now()
  FROM unnest(:ids::bigint[], :versions::bigint[]) AS t(id, lease_version)
 WHERE i.id = t.id AND i.lease_owner = :owner AND i.lease_version = t.lease_version
   AND i.status = 'attempting' AND i.sending_at IS NULL AND i.lease_until > now()
RETURNING i.id, i.id || ':' || i.attempts, i.attempts

-- name: settle
-- transition: attempting -> accepted, retryable, ambiguous, failed
-- why: record a send's outcome; a retryable one on the last attempt fails, one already reported final fails (delivered: accepted)
-- settle (fenced): attempting -> accepted | retryable | ambiguous | failed, with the outcome row
-- appended in the same statement. Returns (intent id, final status) for each row it settled; rows
-- whose lease was lost (expired, or taken over) match nothing: the caller counts them stale.
-- `decided` is the one place the final status is decided: a retryable outcome on the last allowed
-- attempt becomes failed (`exhausted`, reason attempts_exhausted); every SET expression below reads
-- that status, not the rule.
-- The UPDATE is joined to the input by the fence (the small leased index, whatever the history size).
-- A send never handed to the provider (`attempted` false: shutdown, no time left, its channel
-- stopped) is not charged: its attempt number stays used (attempt ids are Message-IDs/keys and
-- the log is append-only) and max_attempts grows by one, so the real sends allowed are unchanged
-- and it is never `exhausted`.
-- A failure carries its verdict (delivery/classification/): the reason (category, code, provider,
-- fault) is recorded on the intent, and what it sets off beyond the delivery runs here too: a
-- recipient's fault suppresses the exact destination, an account fault counts towards holding the
-- channel, a route fault towards holding its route only (suppress_destinations,
-- record_sender_faults, record_route_outcomes), and delivery_failed brings a fallback forward and
-- records the events. While a run of route faults
-- is open on a channel, its sends settled here count in their routes' runs (the share a route hold
-- needs); otherwise no route is even looked up.
-- A provider's final report about the attempt can come before this settle (a status callback posted
-- while the rest of the batch was still being sent): it is stored then (the reports' ingest) and
-- applied here (stored_final_reports_v2): a send whose attempt was reported final, and not delivered, is
-- failed for good with the report's reason (undeliverable, as observe_deliveries fails an accepted
-- one) and delivery_failed runs for it; its recipient, account and route faults were counted when the
-- report was stored. That holds for an ambiguous (or retryable) outcome too: the report proves the
-- provider created the message or call, so it was sent, and the attempt log gains the settlement
-- (`accepted`, `provider_report`) beside the send's own outcome, with the report's provider reference
-- (the intent keeps it too when the send's own outcome had none): the message or call an operator
-- looks up at the provider. A delivery reported first keeps its delivered_at (never written here),
-- and settles an ambiguous (or retryable) outcome of its attempt as sent, as observe_deliveries
-- does one reported after: accepted, with the settlement naming the delivered report's reference,
-- instead of an ambiguity the policy could resolve by sending the code again.
WITH input AS (
    SELECT * FROM unnest(:ids::bigint[], :versions::bigint[], :outcomes::text[], :delays::float8[],
                         :error_classes::text[], :error_details::text[], :provider_refs::text[],
                         :segments::integer[], :attempted::boolean[], :categories::text[], :codes::text[],
                         :providers::text[], :faults::text[], :scopes::text[])
        AS t(id, lease_version, outcome, delay_seconds, error_class, error_detail, provider_ref, segments, attempted,
             category, code, provider, fault, scope)
), observed AS MATERIALIZED (
    -- final reports (failed, or delivered) already stored about these attempts (read after locking
    -- the intents: one ingest running now has committed or sees this settle's outcome)
    SELECT * FROM stored_final_reports_v2(:ids::bigint[], 'attempting')
), decided AS (
    SELECT t.id, t.lease_version, t.outcome, t.delay_seconds, t.error_class, t.error_detail, t.provider_ref,
           t.segments, t.attempted,
           CASE WHEN e.exhausted OR e.reported OR e.delivered THEN NULL ELSE t.scope END AS scope,
           e.exhausted, CASE WHEN e.reported THEN o.failure END AS undeliverable, e.delivered,
           CASE WHEN e.reported OR e.delivered THEN o.provider_ref END AS report_ref,
           CASE WHEN e.exhausted OR e.reported THEN 'failed' WHEN e.delivered THEN 'accepted' ELSE t.outcome END
               AS status,
           CASE WHEN e.exhausted THEN 'attempts_exhausted' WHEN e.reported THEN o.category ELSE t.category END
               AS category,
           CASE WHEN e.exhausted THEN t.error_class WHEN e.reported THEN o.code ELSE t.code END AS code,
           CASE WHEN e.reported THEN o.provider ELSE t.provider END AS provider,
           CASE WHEN e.exhausted THEN 'transient_or_unknown' WHEN e.reported THEN o.fault ELSE t.fault END AS fault
      FROM input AS t
      JOIN delivery_intents AS i ON i.id = t.id
      LEFT JOIN observed AS o ON o.intent_id = t.id
     CROSS JOIN LATERAL (SELECT o.intent_id IS NOT NULL AND t.attempted
                                AND t.outcome IN ('accepted', 'ambiguous', 'retryable') AS ended) AS r
     CROSS JOIN LATERAL (SELECT t.outcome = 'retryable' AND t.attempted AND i.attempts >= i.max_attempts
                                AND NOT r.ended AS exhausted,
                                r.ended AND NOT o.delivered AS reported,
                                r.ended AND o.delivered AND t.outcome <> 'accepted' AS delivered) AS e
), settled AS (
    UPDATE delivery_intents AS i
       SET status = d.status,
           max_attempts = i.max_attempts + (NOT d.attempted)::integer,
           lease_owner = NULL, lease_until = NULL,
           next_attempt_at = CASE WHEN d.status IN ('retryable', 'ambiguous')
                                  THEN now() + make_interval(secs => d.delay_seconds) ELSE i.next_attempt_at END,
           ambiguous_count = i.ambiguous_count + (d.outcome = 'ambiguous')::integer,  -- as its log rows, whatever it ended as
           last_error = CASE WHEN d.status = 'accepted' THEN NULL
                             WHEN d.undeliverable IS NOT NULL THEN left('undeliverable: ' || d.undeliverable, 500)
                             WHEN d.exhausted
                             THEN left('attempts_exhausted: ' || coalesce(d.error_class, '') || ' ' || coalesce(d.error_detail, ''), 500)
                             ELSE left(coalesce(d.error_class, '') || ': ' || coalesce(d.error_detail, ''), 500) END,
           provider_ref = coalesce(d.provider_ref, d.report_ref, i.provider_ref),
           undeliverable_reason = coalesce(d.undeliverable, i.undeliverable_reason),
           completed_at = CASE WHEN d.status IN ('accepted', 'failed') THEN now() END,
           failed_at = CASE WHEN d.status = 'failed' THEN now() END,
           failure_category = CASE WHEN d.status = 'failed' THEN coalesce(d.category, 'unknown') END,
           failure_code = CASE WHEN d.status = 'failed' THEN left(d.code, 64) END,
           failure_provider = CASE WHEN d.status = 'failed' THEN d.provider END,
           failure_fault = CASE WHEN d.status = 'failed' THEN coalesce(d.fault, 'transient_or_unknown') END,
           updated_at = now()
      FROM decided AS d
     WHERE i.id = d.id AND i.lease_owner = :owner AND i.lease_version = d.lease_version
       AND i.status = 'attempting' AND i.sending_at IS NOT NULL AND i.lease_until > now()
    RETURNING i.id, i.attempts, i.channel, i.template_version, i.lease_version, i.last_claimed_at,
              d.outcome, d.status, d.error_class, d.error_detail, d.provider_ref, d.segments,
              i.failure_category, i.failure_code, i.failure_provider, i.failure_fault, d.scope, d.attempted,
              d.undeliverable IS NOT NULL AS undeliverable, d.delivered, d.report_ref
), logged AS (
    INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version, lease_owner,
                                   lease_version, outcome, error_class, error_detail, provider_ref, segments,
                                   claimed_at, attempted_at)
    SELECT s.id || ':' || s.attempts, s.id, s.attempts, s.channel, s.template_version, :owner, s.lease_version,
           s.outcome, s.error_class, left(s.error_detail, 500), s.provider_ref, s.segments, s.last_claimed_at,
           (SELECT a.attempted_at FROM delivery_attempts AS a
             WHERE a.intent_id = s.id AND a.attempt_number = s.attempts AND a.outcome = 'attempting')
      FROM settled AS s
    UNION ALL
    -- an ambiguous (or retryable) send whose final report (failed, or delivered) came first was sent:
    -- the report settles it, as observe_deliveries settles one reported after this settle (the
    -- provider's evidence: no lease, and the reference of the message or call the report is about)
    SELECT s.id || ':' || s.attempts, s.id, s.attempts, s.channel, s.template_version, NULL, NULL,
           'accepted', 'provider_report', NULL, coalesce(s.report_ref, s.provider_ref), NULL, NULL,
           (SELECT a.attempted_at FROM delivery_attempts AS a
             WHERE a.intent_id = s.id AND a.attempt_number = s.attempts AND a.outcome = 'attempting')
      FROM settled AS s
     WHERE (s.undeliverable OR s.delivered) AND s.outcome <> 'accepted'
), failures AS MATERIALIZED (
    SELECT s.id, s.channel, s.failure_fault, s.scope, s.undeliverable,
           jsonb_build_object('intent_id', s.id, 'category', s.failure_category, 'code', s.failure_code,
                              'provider', s.failure_provider, 'fault', s.failure_fault,
                              'status', CASE WHEN s.undeliverable THEN 'undeliverable' ELSE 'failed' END) AS reason
      FROM settled AS s
     WHERE s.status = 'failed'
), followed AS (
    -- what a failure for good sets off (delivery_failed, suppress_destinations), in this statement
    SELECT delivery_failed((SELECT array_agg(f.id) FROM failures AS f),
                           (SELECT jsonb_agg(f.reason) FROM failures AS f)) AS written,
           suppress_destinations((SELECT jsonb_agg(f.reason) FROM failures AS f
                                   WHERE f.failure_fault = 'recipient' AND NOT f.undeliverable),  -- the report's did
                                 make_interval(secs => CAST(:suppress_seconds AS float8))) AS suppressed,
           (SELECT count(*) FROM (
                SELECT record_sender_faults(f.channel, count(*)::integer, min(f.reason ->> 'category'),
                                            min(f.reason ->> 'code'), min(f.reason ->> 'provider'),
                                            CAST(:hold_after AS integer),
                                            make_interval(secs => CAST(:hold_window AS float8)),
                                            make_interval(secs => CAST(:hold_seconds AS float8)))
                  FROM failures AS f WHERE f.scope = 'account' GROUP BY f.channel) AS h) AS holds,
           record_route_outcomes(
               (SELECT jsonb_agg(jsonb_build_object('intent_id', s.id, 'sent', true,
                                                    'fault', s.status = 'failed' AND s.scope = 'route',
                                                    'category', s.failure_category, 'code', s.failure_code,
                                                    'provider', s.failure_provider))
                  FROM settled AS s
                 WHERE s.attempted AND s.channel IN ('email', 'sms')
                   AND ((s.status = 'failed' AND s.scope = 'route')
                        OR s.channel IN (SELECT h.channel FROM channel_holds AS h
                                          WHERE h.route <> ''
                                            AND h.window_started_at > now() - make_interval(secs => CAST(:hold_window AS float8))))),
               CAST(:route_min_destinations AS integer), CAST(:route_min_share AS float8),
               make_interval(secs => CAST(:hold_window AS float8)),
               make_interval(secs => CAST(:hold_seconds AS float8))) AS route_holds
)
SELECT s.id AS intent_id, s.status, s.undeliverable FROM settled AS s, followed

-- name: release
-- transition: claimed, attempting -> ready, retryable
-- why: the owner gives back work whose send never started (shutdown, budget)
-- release (fenced): a claim whose sends never started -> eligible again at once, lease cleared.
-- Not an attempt (graceful shutdown, budget exhausted or the link died before the send began):
--   claimed                       -> ready/retryable, nothing logged (no attempt was begun);
--   attempting, sending_at NULL   -> retryable, a 'released' row ends the attempt the fused claim
--                                    began (outbox/queries.sql:claim); max_attempts + 1, so it is not charged
--                                    (its number stays used: attempt ids are Message-IDs/keys).
-- An attempt whose sends started (sending_at set) is never released: only settle ends it.
-- The rows are locked first and `begun` read from the locked versions (expire_claims says why).
WITH held AS (
    SELECT i.id, i.status FROM delivery_intents AS i
      JOIN unnest(:ids::bigint[], :versions::bigint[]) AS t(id, lease_version) ON t.id = i.id
     WHERE i.lease_owner = :owner AND i.lease_version = t.lease_version AND i.lease_until > now()
       AND (i.status = 'claimed' OR (i.status = 'attempting' AND i.sending_at IS NULL))
       FOR UPDATE OF i
), released AS (
    UPDATE delivery_intents AS i
       SET status = CASE WHEN i.attempts = 0 THEN 'ready' ELSE 'retryable' END,
           max_attempts = i.max_attempts + (h.status = 'attempting')::integer,
           lease_owner = NULL, lease_until = NULL, updated_at = now()
      FROM held AS h
     WHERE i.id = h.id
    RETURNING i.id, i.attempts, i.channel, i.template_version, i.lease_version, i.last_claimed_at,
              h.status = 'attempting' AS begun
), logged AS (
    INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version, lease_owner,
                                   lease_version, outcome, error_class, error_detail, claimed_at)
    SELECT r.id || ':' || r.attempts, r.id, r.attempts, r.channel, r.template_version, :owner, r.lease_version,
           'released', 'released', 'claimed ahead; released before its send started', r.last_claimed_at
      FROM released AS r
     WHERE r.begun
)
SELECT r.id FROM released AS r

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

-- name: expire_claims
-- transition: claimed, attempting -> ready, retryable
-- why: the reconciler gives back an expired claim whose send never started
-- release, reconciler's guard: a claim whose lease expired before any send began -> eligible again.
-- Same transition as outbox/queries.sql:release (not an attempt; an attempt begun by the fused claim gets its
-- 'released' row); only the guard differs: expiry instead of owner. "Before any send began" is
-- status 'claimed', or 'attempting' with sending_at NULL (outbox/queries.sql:start never ran for it).
-- The attempt log is written from the locked row (the CTE's columns), never from the statement's
-- snapshot, which may predate the row's last change.
WITH expired AS (
    SELECT id, status, lease_owner FROM delivery_intents
     WHERE status IN ('claimed', 'attempting') AND lease_until <= now() AND (status = 'claimed' OR sending_at IS NULL)
     ORDER BY lease_until
     LIMIT :limit
       FOR UPDATE SKIP LOCKED
), released AS (
    UPDATE delivery_intents AS i
       SET status = CASE WHEN i.attempts = 0 THEN 'ready' ELSE 'retryable' END,
           max_attempts = i.max_attempts + (e.status = 'attempting')::integer,
           lease_owner = NULL, lease_until = NULL, updated_at = now()
      FROM expired AS e
     WHERE i.id = e.id
    RETURNING i.id, i.channel, i.attempts, i.template_version, i.lease_version, i.last_claimed_at,
              e.lease_owner, e.status = 'attempting' AS begun
), logged AS (
    INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version, lease_owner,
                                   lease_version, outcome, error_class, error_detail, claimed_at)
    SELECT r.id || ':' || r.attempts, r.id, r.attempts, r.channel, r.template_version, r.lease_owner,
           r.lease_version, 'released', 'lease_expired', 'lease expired before its send started', r.last_claimed_at
      FROM released AS r
     WHERE r.begun
)
SELECT r.id, r.channel FROM released AS r

-- name: lose_leases
-- transition: attempting -> accepted, ambiguous, failed
-- why: the reconciler: a lease expired mid-send, so it may have been sent (already reported: it was, failed or accepted)
-- lease lost: attempting with an expired lease -> ambiguous (a send may have happened), held per
-- the channel's policy, with an attempt row recording the lost lease. Only once its sends started
-- (sending_at): an attempt the fused claim began whose sends never started is released instead.
-- A final report of the attempt stored while it was in flight (stored_final_reports_v2, as the settle
-- reads them) proves the provider created the message or call: the intent fails for good with the
-- report's reason (undeliverable) instead of waiting for the ambiguity policy, the log gains the
-- settlement (`accepted`, `provider_report`, with the report's provider reference, which the intent
-- keeps too) after the lost lease, and delivery_failed runs for it. A delivery reported while it was in
-- flight proves it too: the intent is accepted (its delivered_at kept) with the same settlement.
WITH policy AS (
    SELECT * FROM unnest(:channels::text[], :holds::float8[]) AS p(channel, hold_seconds)
), lost AS (  -- the locked rows' columns, not the statement snapshot's (expire_claims says why)
    SELECT id, channel, lease_owner FROM delivery_intents
     WHERE status = 'attempting' AND lease_until <= now() AND sending_at IS NOT NULL  -- else: outbox/queries.sql:expire_claims
     ORDER BY lease_until
     LIMIT :limit
       FOR UPDATE SKIP LOCKED
), observed AS MATERIALIZED (
    SELECT * FROM stored_final_reports_v2(ARRAY(SELECT id FROM lost), 'attempting')
), moved AS (
    UPDATE delivery_intents AS i
       SET status = CASE WHEN o.delivered THEN 'accepted' WHEN o.intent_id IS NOT NULL THEN 'failed'
                         ELSE 'ambiguous' END,
           lease_owner = NULL, lease_until = NULL,
           next_attempt_at = CASE WHEN o.intent_id IS NOT NULL THEN i.next_attempt_at
                                  ELSE now() + make_interval(secs => coalesce(p.hold_seconds, 0)) END,
           ambiguous_count = i.ambiguous_count + 1,
           last_error = CASE WHEN o.delivered THEN NULL
                             WHEN o.intent_id IS NOT NULL THEN left('undeliverable: ' || o.failure, 500)
                             ELSE 'lease_lost: the worker stopped after starting the send' END,
           undeliverable_reason = coalesce(o.failure, i.undeliverable_reason),
           provider_ref = coalesce(o.provider_ref, i.provider_ref),
           completed_at = CASE WHEN o.intent_id IS NOT NULL THEN now() ELSE i.completed_at END,
           failed_at = CASE WHEN o.failure IS NOT NULL THEN now() ELSE i.failed_at END,
           failure_category = CASE WHEN o.failure IS NOT NULL THEN o.category ELSE i.failure_category END,
           failure_code = CASE WHEN o.failure IS NOT NULL THEN left(o.code, 64) ELSE i.failure_code END,
           failure_provider = CASE WHEN o.failure IS NOT NULL THEN o.provider ELSE i.failure_provider END,
           failure_fault = CASE WHEN o.failure IS NOT NULL THEN o.fault ELSE i.failure_fault END,
           updated_at = now()
      FROM lost AS l
      LEFT JOIN policy AS p ON p.channel = l.channel
      LEFT JOIN observed AS o ON o.intent_id = l.id
     WHERE i.id = l.id
    RETURNING i.id, i.attempts, i.channel, i.template_version, l.lease_owner, i.lease_version, i.last_claimed_at,
              i.status, i.failure_category, i.failure_code, i.failure_provider, i.failure_fault,
              o.provider_ref AS report_ref
), logged AS (
    INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version, lease_owner,
                                   lease_version, outcome, error_class, error_detail, provider_ref, claimed_at,
                                   attempted_at)
    SELECT m.id || ':' || m.attempts, m.id, m.attempts, m.channel, m.template_version,
           -- the settlement is the provider's evidence, written under no lease (as observe_deliveries')
           CASE WHEN e.outcome = 'ambiguous' THEN m.lease_owner END,
           CASE WHEN e.outcome = 'ambiguous' THEN m.lease_version END, e.outcome, e.error_class, e.error_detail,
           CASE WHEN e.outcome = 'accepted' THEN m.report_ref END,
           CASE WHEN e.outcome = 'ambiguous' THEN m.last_claimed_at END,
           CASE WHEN e.outcome = 'accepted'
                THEN (SELECT a.attempted_at FROM delivery_attempts AS a
                       WHERE a.intent_id = m.id AND a.attempt_number = m.attempts AND a.outcome = 'attempting') END
      FROM moved AS m
     CROSS JOIN LATERAL (VALUES ('ambiguous', 'lease_lost', 'lease expired while attempting'),
                                ('accepted', 'provider_report', NULL)) AS e(outcome, error_class, error_detail)
     WHERE e.outcome = 'ambiguous' OR m.status IN ('failed', 'accepted')
), followed AS (
    -- what a failure for good sets off (delivery_failed), in this statement
    SELECT delivery_failed(array_agg(m.id) FILTER (WHERE m.status = 'failed'),
                           jsonb_agg(jsonb_build_object('intent_id', m.id, 'category', m.failure_category,
                                                        'code', m.failure_code, 'provider', m.failure_provider,
                                                        'fault', m.failure_fault, 'status', 'undeliverable'))
                               FILTER (WHERE m.status = 'failed')) AS written
      FROM moved AS m
)
SELECT m.id AS intent_id, m.channel FROM moved AS m, followed

-- name: resolve_ambiguous
-- transition: ambiguous -> retryable, failed
-- why: the reconciler: an ambiguous hold is over (policy retry or fail)
-- resolve ambiguous: an ambiguous intent whose hold has passed -> retryable (policy 'retry', attempts
-- left) or failed (policy 'fail', or no attempt left). Policy 'hold' channels are not passed in:
-- they stay ambiguous for the operator. A failure's reason is `unconfirmed` (it may have been sent;
-- the policy gave up on it), nobody's fault we can name.
WITH policy AS (
    SELECT * FROM unnest(:channels::text[], :policies::text[]) AS p(channel, policy)
), due AS (
    SELECT i.id, p.policy FROM delivery_intents AS i JOIN policy AS p ON p.channel = i.channel
     WHERE i.status = 'ambiguous' AND i.next_attempt_at <= now()
     ORDER BY i.next_attempt_at
     LIMIT :limit
       FOR UPDATE OF i SKIP LOCKED
), resolved AS (
    UPDATE delivery_intents AS i
       SET status = CASE WHEN d.policy = 'retry' AND i.attempts < i.max_attempts THEN 'retryable' ELSE 'failed' END,
           completed_at = CASE WHEN d.policy = 'retry' AND i.attempts < i.max_attempts THEN NULL ELSE now() END,
           last_error = CASE WHEN d.policy = 'retry' AND i.attempts < i.max_attempts
                             THEN 'ambiguous: retrying after hold' ELSE 'ambiguous: given up after hold' END,
           failed_at = CASE WHEN d.policy = 'retry' AND i.attempts < i.max_attempts THEN NULL ELSE now() END,
           failure_category = CASE WHEN d.policy = 'retry' AND i.attempts < i.max_attempts THEN NULL
                                   ELSE 'unconfirmed' END,
           failure_fault = CASE WHEN d.policy = 'retry' AND i.attempts < i.max_attempts THEN NULL
                                ELSE 'transient_or_unknown' END,
           next_attempt_at = now(), updated_at = now()
      FROM due AS d
     WHERE i.id = d.id
    RETURNING i.id, i.channel, i.status
), followed AS (
    -- what a failure for good sets off (delivery_failed), in this statement
    SELECT delivery_failed(array_agg(r.id) FILTER (WHERE r.status = 'failed'),
                           jsonb_agg(jsonb_build_object('intent_id', r.id, 'category', 'unconfirmed',
                                                        'fault', 'transient_or_unknown'))
                               FILTER (WHERE r.status = 'failed')) AS written
      FROM resolved AS r
)
SELECT r.id, r.channel, r.status FROM resolved AS r, followed

-- name: resolve_lookup
-- transition: ambiguous -> accepted, retryable, failed
-- why: the reconciler asked the provider about an ambiguous send (found, but reported final: failed)
-- resolve by lookup: an ambiguous SMS, WhatsApp message or call the reconciler looked up at the provider.
--   found  (sid given)  -> accepted with that sid as provider_ref: it was sent, later reports attach to it;
--   absent (sid NULL)   -> retryable (attempts left) or failed (attempts_exhausted): the provider's
--                          settled listing has no such message or call, so it was never created and a new
--                          attempt sends it once.
-- Only rows still ambiguous with the same attempt move (a concurrent report or resolve wins); the
-- attempt log gains the outcome of the looked-up attempt in the same statement.
-- A final report of the found attempt already stored and not applied (stored_final_reports_v2) is applied
-- here, as the settle applies one: the message was sent and will never arrive, so the intent fails for
-- good with the report's reason (undeliverable) and delivery_failed runs for it.
WITH input AS (
    SELECT * FROM unnest(:ids::bigint[], :attempt_ids::text[], :sids::text[]) AS t(id, attempt_id, sid)
), observed AS MATERIALIZED (
    SELECT * FROM stored_final_reports_v2(:ids::bigint[], 'ambiguous') WHERE NOT delivered
), resolved AS (
    UPDATE delivery_intents AS i
       SET status = CASE WHEN t.sid IS NOT NULL AND o.intent_id IS NOT NULL THEN 'failed'
                         WHEN t.sid IS NOT NULL THEN 'accepted'
                         WHEN i.attempts < i.max_attempts THEN 'retryable' ELSE 'failed' END,
           provider_ref = coalesce(t.sid, i.provider_ref),
           completed_at = CASE WHEN t.sid IS NOT NULL OR i.attempts >= i.max_attempts THEN now() END,
           last_error = CASE WHEN t.sid IS NOT NULL AND o.intent_id IS NOT NULL
                             THEN left('undeliverable: ' || o.failure, 500)
                             WHEN t.sid IS NOT NULL THEN NULL
                             WHEN i.attempts < i.max_attempts THEN 'ambiguous: provider has no such message, retrying'
                             ELSE 'ambiguous: provider has no such message, no attempt left' END,
           undeliverable_reason = coalesce(CASE WHEN t.sid IS NOT NULL THEN o.failure END, i.undeliverable_reason),
           failed_at = CASE WHEN (t.sid IS NULL AND i.attempts >= i.max_attempts)
                                 OR (t.sid IS NOT NULL AND o.intent_id IS NOT NULL) THEN now() END,
           failure_category = CASE WHEN t.sid IS NOT NULL THEN o.category
                                   WHEN i.attempts >= i.max_attempts THEN 'attempts_exhausted' END,
           failure_code = CASE WHEN t.sid IS NOT NULL THEN left(o.code, 64) END,
           failure_provider = CASE WHEN t.sid IS NOT NULL THEN o.provider END,
           failure_fault = CASE WHEN t.sid IS NOT NULL THEN o.fault
                                WHEN i.attempts >= i.max_attempts THEN 'transient_or_unknown' END,
           next_attempt_at = now(), updated_at = now()
      FROM input AS t
      LEFT JOIN observed AS o ON o.intent_id = t.id
     WHERE i.id = t.id AND i.status = 'ambiguous'
       AND t.attempt_id = i.id || ':' || i.attempts
    RETURNING i.id, i.status, i.channel, i.template_version, i.attempts, t.attempt_id, t.sid,
              i.failure_category, i.failure_code, i.failure_provider, i.failure_fault,
              i.undeliverable_reason IS NOT NULL AS undeliverable
), logged AS (
    INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version, outcome,
                                   error_class, provider_ref, attempted_at)
    SELECT r.attempt_id, r.id, r.attempts, r.channel, r.template_version,
           CASE WHEN r.sid IS NOT NULL THEN 'accepted' WHEN r.status = 'retryable' THEN 'retryable' ELSE 'failed' END,
           CASE WHEN r.sid IS NOT NULL THEN 'provider_lookup_found' ELSE 'provider_lookup_absent' END, r.sid,
           (SELECT a.attempted_at FROM delivery_attempts AS a
             WHERE a.intent_id = r.id AND a.attempt_number = r.attempts AND a.outcome = 'attempting')
      FROM resolved AS r
    ON CONFLICT (intent_id, attempt_number, outcome) DO NOTHING  -- one row per attempt and outcome
), followed AS (
    -- what a failure for good sets off (delivery_failed), in this statement
    SELECT delivery_failed(array_agg(r.id) FILTER (WHERE r.status = 'failed'),
                           jsonb_agg(jsonb_build_object('intent_id', r.id, 'category', r.failure_category,
                                                        'code', r.failure_code, 'provider', r.failure_provider,
                                                        'fault', r.failure_fault,
                                                        'status', CASE WHEN r.undeliverable THEN 'undeliverable'
                                                                       ELSE 'failed' END))
                               FILTER (WHERE r.status = 'failed')) AS written
      FROM resolved AS r
)
SELECT r.id, r.status FROM resolved AS r, followed

-- name: suppress_dead
-- suppress: undelivered intents of verifications that are no longer pending, or past expiry,
-- through the shared suppress transition (suppress_undelivered_intents). Expired pending verifications are marked first.
-- Rows: (reason, intent id, NULL) per suppressed intent, then one (NULL, NULL, n) with the number of
-- verifications marked expired (a batch can expire verifications whose intents already finished).
-- Each verification marked expired records its `verification.expired` webhook event in this statement
-- (record_event); webhook events are never dead (they report the end).
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

-- name: replay_events
-- transition: accepted, failed -> ready
-- why: `verifyctl webhooks replay`: a finished webhook event is sent again, same webhook-id (guarded, unfenced)
-- replay (guarded, not fenced): finished webhook events -> ready again, with a fresh attempt budget,
-- for `verifyctl webhooks replay`. The dispatcher then sends each one as it sends any event: the
-- webhook-id is derived from the verification, the type and the subject (delivery/events.py), so the
-- receiver sees the id it saw before and deduplicates.
-- No fence: a finished intent has no lease and nobody holds one to present. The status guard is
-- what makes it safe: only accepted and failed events are taken, under the row lock this UPDATE
-- holds, so a replay racing another replay moves each event once (the second sees 'ready' and
-- skips it), and a worker whose lease on the event expired long ago still cannot write it (settle
-- and release match status 'attempting' and the lease; the next claim bumps lease_version anyway).
-- The attempt log is append-only and stays as it was: attempt numbers continue from `attempts`.
-- Batched by id (:limit rows per statement); `completed_at >= :since` holds for every event created
-- since :since (it finished after it was written) and lets the completed partial index find them.
WITH chosen AS (
    SELECT i.id, i.status FROM delivery_intents AS i
     WHERE i.role = 'event' AND i.status IN ('accepted', 'failed') AND i.completed_at IS NOT NULL
       AND (CAST(:verification_id AS uuid) IS NULL OR i.verification_id = CAST(:verification_id AS uuid))
       AND (CAST(:since AS timestamptz) IS NULL
            OR (i.created_at >= CAST(:since AS timestamptz) AND i.completed_at >= CAST(:since AS timestamptz)))
       AND i.id > :after
     ORDER BY i.id
     LIMIT :limit
       FOR UPDATE
)
UPDATE delivery_intents AS i
   SET status = 'ready', next_attempt_at = now(), max_attempts = i.attempts + :max_attempts,
       completed_at = NULL, failed_at = NULL, last_error = NULL,
       failure_category = NULL, failure_code = NULL, failure_provider = NULL, failure_fault = NULL,
       updated_at = now()
  FROM chosen AS c
 WHERE i.id = c.id AND i.status IN ('accepted', 'failed')
RETURNING i.id, i.verification_id, i.event_type, i.event_subject, c.status AS was

-- name: idle_probe
-- idle probe: is there anything the claim would take now, and has a newer invocation taken over the
-- waiting (outbox/queries.sql:idle_enter)? One probe per channel of the eligible partial index (delivery_intents_eligible,
-- (channel, next_attempt_at, id): the first due row of the channel's range): on an empty outbox each
-- finds nothing, and the only other read is the dispatch heartbeat row by primary key. The SMS budget
-- (sms_budget_left, SMS and WhatsApp) and the call budget (voice_budget_left) are read only when an
-- intent they cover is due: past the budget those stay eligible but
-- the claim would not take them, so they must not wake the worker (it would claim nothing, every poll);
-- so must the intents of a held channel (channel_held) or a slowed one (its provider answered
-- 429, channel_slowed), read only when one is due.
SELECT ((EXISTS (SELECT 1 FROM eligible_delivery_intents WHERE channel = 'email')
         AND NOT channel_held('email') AND NOT channel_slowed('email'))
        OR (EXISTS (SELECT 1 FROM eligible_delivery_intents WHERE channel = 'webhook') AND NOT channel_slowed('webhook'))
        OR (EXISTS (SELECT 1 FROM eligible_delivery_intents WHERE channel = 'sms')
            AND NOT channel_held('sms') AND NOT channel_slowed('sms')
            AND (SELECT sms_budget_left(CAST(:sms_max AS integer))) IS DISTINCT FROM 0)
        OR (EXISTS (SELECT 1 FROM eligible_delivery_intents WHERE channel = 'whatsapp')
            AND NOT channel_held('whatsapp') AND NOT channel_slowed('whatsapp')
            AND (SELECT sms_budget_left(CAST(:sms_max AS integer))) IS DISTINCT FROM 0)
        OR (EXISTS (SELECT 1 FROM eligible_delivery_intents WHERE channel = 'voice')
            AND NOT channel_held('voice') AND NOT channel_slowed('voice')
            AND (SELECT voice_budget_left(CAST(:voice_max AS integer))) IS DISTINCT FROM 0)) AS waiting,
       coalesce((SELECT watermark ->> 'idle_owner' FROM worker_heartbeats WHERE name = :name), :owner)
           <> :owner AS superseded

-- name: idle_enter
-- An invocation starts waiting for work: it becomes the deployment's idle waiter unless a newer
-- invocation (by start time, the database clock) already is. The older waiter sees this in its next
-- probe (outbox/queries.sql:idle_probe: superseded) and returns, so the scheduler's next tick hands the waiting
-- over without a gap and without two instances waiting for long. An owner that died simply has
-- an older start and is replaced.
INSERT INTO worker_heartbeats (name, deployment, watermark)
VALUES (:name, :deployment, jsonb_build_object(
        'idle_owner', CAST(:owner AS text),
        'idle_owner_started', now() - make_interval(secs => :elapsed)))
ON CONFLICT (name) DO UPDATE
   SET watermark = worker_heartbeats.watermark || EXCLUDED.watermark
 WHERE coalesce(CAST(worker_heartbeats.watermark ->> 'idle_owner_started' AS timestamptz), '-infinity')
       <= CAST(EXCLUDED.watermark ->> 'idle_owner_started' AS timestamptz)

-- name: heartbeat_start_dispatch
-- Start of a dispatch invocation: the last invocation's latency figures, and this session switched
-- to custom plans: the batched transitions join an unnest() of array parameters whose length a
-- generic plan cannot know (it assumes 10 rows and picks a nested loop that rescans the input per
-- leased row: 500 intents took 300+ ms instead of 40). Planning each execution costs well under a
-- millisecond, a few times per batch.
SELECT set_config('plan_cache_mode', 'force_custom_plan', false) AS plan_mode,
       (SELECT watermark -> 'send_latency_seconds' FROM worker_heartbeats WHERE name = :name) AS latency

-- name: heartbeat_save_latency
-- End of a dispatch invocation: what it measured seeds the next one's batch sizing.
UPDATE worker_heartbeats
   SET watermark = watermark || jsonb_build_object('send_latency_seconds', CAST(:latency AS jsonb))
 WHERE name = :name

-- name: heartbeat_complete_dispatch
-- End of a dispatch invocation (whether or not it claimed anything): last_completed_at, which
-- `verifyctl status` shows as the dispatcher's last completed run.
INSERT INTO worker_heartbeats (name, deployment, last_completed_at)
VALUES (:name, :deployment, now())
ON CONFLICT (name) DO UPDATE SET last_completed_at = now()

-- name: heartbeat_record_claim
-- A dispatch invocation claimed work: last_claim_at (the absence alert reads it) and the latency
-- figures measured so far.
INSERT INTO worker_heartbeats (name, deployment, last_claim_at, watermark)
VALUES (:name, :deployment, now(), jsonb_build_object('send_latency_seconds', CAST(:latency AS jsonb)))
ON CONFLICT (name) DO UPDATE
   SET last_claim_at = now(),
       watermark = worker_heartbeats.watermark || jsonb_build_object('send_latency_seconds', CAST(:latency AS jsonb))

-- name: heartbeat_begin_run
-- Start of a reconcile run: the heartbeat row 'reconcile:<deployment>' records it; the previous
-- watermark comes back so the run can carry `covered_through` forward if it does not drain.
INSERT INTO worker_heartbeats AS h (name, deployment, last_started_at)
VALUES (:name, :deployment, now())
ON CONFLICT (name) DO UPDATE SET last_started_at = now(), deployment = EXCLUDED.deployment
RETURNING h.last_started_at AS started_at, h.watermark AS previous

-- name: heartbeat_complete_run
-- End of a reconcile run: last_completed_at and the watermark (what the run covered).
UPDATE worker_heartbeats
   SET last_completed_at = now(), watermark = :watermark::jsonb || jsonb_build_object('run_completed_at', rfc3339(now()))
 WHERE name = :name
RETURNING last_completed_at

-- name: heartbeat_rows
-- Every heartbeat row with the ages the status table shows.
SELECT name, deployment, last_started_at, last_completed_at, last_claim_at,
       extract(epoch FROM now() - last_completed_at)::float8 AS completed_age_seconds,
       extract(epoch FROM now() - last_claim_at)::float8 AS claim_age_seconds, watermark
  FROM worker_heartbeats
 ORDER BY name

-- name: sms_grant
-- verifyctl sms resume: grant the current UTC hour another budget's worth of SMS.
INSERT INTO sms_budget_grants (hour, extra, granted_by)
VALUES (date_trunc('hour', now(), 'UTC'), :extra, :granted_by)
ON CONFLICT (hour) DO UPDATE SET extra = sms_budget_grants.extra + EXCLUDED.extra,
                                 granted_by = EXCLUDED.granted_by, granted_at = now()
RETURNING sms_budget_left(CAST(:sms_max AS integer)) + :extra AS budget_left

-- name: voice_grant
-- verifyctl voice resume: grant the current UTC hour another budget's worth of calls.
INSERT INTO voice_budget_grants (hour, extra, granted_by)
VALUES (date_trunc('hour', now(), 'UTC'), :extra, :granted_by)
ON CONFLICT (hour) DO UPDATE SET extra = voice_budget_grants.extra + EXCLUDED.extra,
                                 granted_by = EXCLUDED.granted_by, granted_at = now()
RETURNING voice_budget_left(CAST(:voice_max AS integer)) + :extra AS budget_left
