-- report_verdicts: the parts of each input event's verdict that are not stored on its observation
-- (the reason's code, the fault's scope: account | route | message), by dedup_key, read beside the
-- new rows. Changing the result type needs `DROP FUNCTION IF EXISTS <old signature>;` first.
DROP FUNCTION IF EXISTS report_verdicts(jsonb);
CREATE OR REPLACE FUNCTION report_verdicts(p_events jsonb) RETURNS TABLE (dedup_key text, code text, scope text)
LANGUAGE sql IMMUTABLE AS $$
    SELECT DISTINCT ON (e.dedup_key) e.dedup_key, e.code, e.scope
      FROM jsonb_to_recordset(p_events) AS e(dedup_key text, code text, scope text)
     ORDER BY e.dedup_key
$$;
