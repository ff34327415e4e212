-- Refused creates that count, and fan-out slots that are claimed.
--
-- 1. create_events: a create refused with an answer about someone else (the suppression list's 422,
--    a 429 of another destination's, prefix's or country's limit) is a `refused` row
--    (sql/definitions/15 count_refused_create): it names the caller (account, client key) and no
--    destination, so the account and client limits count it and no destination limit does. Its
--    verification_id is the id the refused create would have had: it names no verification. The
--    reconciler's reap_refused_creates duty deletes the rows past every window, on their own index.
ALTER TABLE create_events
    DROP CONSTRAINT create_events_role,
    ADD CONSTRAINT create_events_role CHECK (role IN ('primary', 'fallback', 'refused')),
    ALTER COLUMN destination_key DROP NOT NULL,
    ADD CONSTRAINT create_events_refused_keys CHECK ((role = 'refused') = (destination_key IS NULL)
                                                     AND (role <> 'refused' OR (prefix_key IS NULL AND country IS NULL
                                                                                AND exact_key IS NULL)));
CREATE INDEX create_events_refused ON create_events (created_at) WHERE role = 'refused';

-- 2. dispatch_invocations: a fan-out invocation runs only the slot it claimed, once (fanout_begin.sql:
--    reserved, live and unclaimed, in one UPDATE), and frees only that claim at its end
--    (fanout_end.sql). claimed_by is the claiming invocation's own token: a replayed or forged slot
--    claims nothing, so it neither runs nor deletes another invocation's slot.
--    A slot begun before this migration is taken as claimed by its own name (its invocation frees it
--    by slot, or it stops counting at `until`).
ALTER TABLE dispatch_invocations
    ADD COLUMN claimed_by text CONSTRAINT dispatch_invocations_claimed_by CHECK (length(claimed_by) <= 200);
UPDATE dispatch_invocations SET claimed_by = slot WHERE started_at IS NOT NULL;
ALTER TABLE dispatch_invocations
    ADD CONSTRAINT dispatch_invocations_claim CHECK ((claimed_by IS NULL) = (started_at IS NULL));
