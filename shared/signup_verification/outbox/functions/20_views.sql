-- The outbox's views: what is eligible, what a step sent: one file of the outbox package's functions and
-- views (platform/catalogue.py; applied by platform/migrations.py in file-name order).

-- name: eligible_delivery_intents
-- The one definition of "eligible for delivery". The worker's claim and the operator signals
-- both read this view, so the chart and the queue cannot disagree.
-- `SELECT *` is expanded when the view is (re)created: the runner re-applies every definition after
-- a migration, so a column a migration adds to delivery_intents reaches the view in that same run.
-- CREATE OR REPLACE VIEW may only append columns; a migration that drops or retypes one of
-- delivery_intents' columns must `DROP VIEW eligible_delivery_intents` first (this file recreates it).
CREATE OR REPLACE VIEW eligible_delivery_intents AS
    SELECT * FROM delivery_intents
    WHERE status IN ('ready', 'retryable') AND next_attempt_at <= now();

-- name: step_sends
-- The one definition of "this step's message may have reached the person": each message intent (a
-- verification's step) with `may_have_reached`, a send that began and was not proven never to have
-- reached the provider: in flight (its send started: sending_at, status attempting), taken by the
-- provider (accepted, a delivered or final report: delivered_at, undeliverable_reason), or an
-- ambiguous attempt the provider's lookup did not find absent (each lookup that found an ambiguous
-- attempt absent logs one `provider_lookup_absent` row). Every other attempt certainly reached no
-- one: released before its send started, settled `retryable`, refused for good at submission
-- (`failed` without a report), absent at the provider. `ended_unsent`: the intent is terminal and its
-- message never reached the provider (it failed before any send, or was suppressed or expired
-- unsent): it never will. The confirmations' state and the read API read both
-- (verifications/queries/confirm.sql:confirm_state, read). Only an intent with an ambiguous attempt reads the
-- attempt log, on its primary key by intent: the cost is the verification's few intents, whatever the
-- history.
CREATE OR REPLACE VIEW step_sends AS
    SELECT i.verification_id, i.channel, r.may_have_reached, i.completed_at IS NOT NULL AND NOT r.may_have_reached
           AS ended_unsent
      FROM delivery_intents AS i
     CROSS JOIN LATERAL (
         SELECT (i.status = 'attempting' AND i.sending_at IS NOT NULL)
                OR i.status = 'accepted' OR i.undeliverable_reason IS NOT NULL OR i.delivered_at IS NOT NULL
                OR (i.ambiguous_count > 0
                    AND i.ambiguous_count > (SELECT count(*) FROM delivery_attempts AS a
                                              WHERE a.intent_id = i.id AND a.error_class = 'provider_lookup_absent'))
                    AS may_have_reached) AS r
     WHERE i.event_type IS NULL;
