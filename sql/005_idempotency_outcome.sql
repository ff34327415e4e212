-- The idempotency record stores the domain outcome of the first request (kind + the data needed to
-- re-render it), not an HTTP status and body: the HTTP edge (api/) renders both answers the same way.
-- Rows written by the old create_verification (within their 24 h TTL) are converted in place: the
-- only stored answer was 201 with the created verification's fields, which is exactly the data.
ALTER TABLE idempotency_keys ADD COLUMN outcome text, ADD COLUMN outcome_data jsonb;
UPDATE idempotency_keys SET outcome = 'created', outcome_data = response_body WHERE response_status = 201;
ALTER TABLE idempotency_keys DROP COLUMN response_status, DROP COLUMN response_body;
-- create_verification's result type changes (no status code): CREATE OR REPLACE cannot do that.
DROP FUNCTION IF EXISTS create_verification(text, text, bytea, interval, uuid, text, text, text, text, text,
                                            text, text, bytea, bytea, interval, integer, integer, integer,
                                            interval, interval);
