-- report_verdicts: the parts of each input event's verdict that are not stored on its observation
-- (the reason's code, whether it holds the channel), by dedup_key, read beside the new rows.
CREATE OR REPLACE FUNCTION report_verdicts(p_events jsonb) RETURNS TABLE (dedup_key text, code text, holds boolean)
LANGUAGE sql IMMUTABLE AS $$
    SELECT DISTINCT ON (e.dedup_key) e.dedup_key, e.code, coalesce(e.holds, false)
      FROM jsonb_to_recordset(p_events) AS e(dedup_key text, code text, holds boolean)
     ORDER BY e.dedup_key
$$;
