-- The outbox's statements the reconciler runs: expired claims and leases, ambiguous holds, dead
-- verifications: one file of the outbox package's named statements (platform/catalogue.py).

-- name: expire_claims
-- transition: claimed, attempting -> ready, retryable
-- why: the reconciler gives back an expired claim whose send never started
-- release, reconciler's guard: a claim whose lease expired before any send began -> eligible again.
-- Same transition as outbox/queries/settle.sql:release (not an attempt; an attempt begun by the fused claim gets its
-- 'released' row); only the guard differs: expiry instead of owner. "Before any send began" is
-- status 'claimed', or 'attempting' with sending_at NULL (outbox/queries/claim.sql:start never ran for it).
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
     WHERE status = 'attempting' AND lease_until <= now() AND sending_at IS NOT NULL  -- else: outbox/queries/reconcile.sql:expire_claims
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
