-- Abuse limits at create, called by create_verification inside its transaction.
-- count_refused_create: a create refused with an answer about someone else (the suppression list's
-- 422, a 429 of the destination, prefix or country limits) counts against the caller's own limits
-- as a create would: a `refused` create_events row with the account and the client key only, so the
-- account and client limits read it (create_limit_wait, sql/definitions/06: every role but
-- `fallback`; the client index) and no destination, prefix or country limit does (their keys are
-- NULL). p_id is the verification id the refused create would have had: the row's key, naming no
-- verification. The reconciler's reap_refused_creates duty deletes the rows once past every window.
CREATE OR REPLACE FUNCTION count_refused_create(p_id uuid, p_account_id text, p_channel text, p_client_key bytea)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO create_events (verification_id, account_id, channel, destination_key, client_key, role)
    VALUES (p_id, p_account_id, p_channel, NULL, p_client_key, 'refused')
$$;
