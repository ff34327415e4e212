-- The outbox's statements that end a worker's attempt: settle a send's outcome, or give back work never
-- sent: one file of the outbox package's named statements (platform/catalogue.py).

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
--                                    began (outbox/queries/claim.sql:claim); max_attempts + 1, so it is not charged
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
