-- report_verdicts: the parts of each input event's verdict that are not stored on its observation
-- (the reason's code, the fault's scope: account | route | message, and the reason's provider), by
-- dedup_key, read beside the new rows. The reason's provider is the one the message went out through
-- (`smtp` for mail SendGrid relayed over SMTP), which may not be the reporting one
-- (delivery_observations.provider). Changing the result type needs `DROP FUNCTION IF EXISTS <old
-- signature>;` first.
DROP FUNCTION IF EXISTS report_verdicts(jsonb);
CREATE OR REPLACE FUNCTION report_verdicts(p_events jsonb)
RETURNS TABLE (dedup_key text, code text, scope text, provider text)
LANGUAGE sql IMMUTABLE AS $$
    SELECT DISTINCT ON (e.dedup_key) e.dedup_key, e.code, e.scope, e.provider
      FROM jsonb_to_recordset(p_events) AS e(dedup_key text, code text, scope text, provider text)
     ORDER BY e.dedup_key
$$;
