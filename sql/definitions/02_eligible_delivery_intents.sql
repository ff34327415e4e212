-- The one definition of "eligible for delivery". The worker's claim and the operator signals
-- both read this view, so the chart and the queue cannot disagree.
-- `SELECT *` is expanded when the view is (re)created: the runner re-applies every definition after
-- a migration, so a column a migration adds to delivery_intents reaches the view in that same run.
-- CREATE OR REPLACE VIEW may only append columns; a migration that drops or retypes one of
-- delivery_intents' columns must `DROP VIEW eligible_delivery_intents` first (this file recreates it).
CREATE OR REPLACE VIEW eligible_delivery_intents AS
    SELECT * FROM delivery_intents
    WHERE status IN ('ready', 'retryable') AND next_attempt_at <= now();
