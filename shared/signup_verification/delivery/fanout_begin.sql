-- A fan-out invocation claims its slot: the row a scheduled invocation of this deployment reserved,
-- still live and never claimed, taken in this one UPDATE (two deliveries of one task: the second
-- waits on the row, then finds it claimed). Claimed, it lives until this invocation's own deadline
-- and names its claimant, so only that invocation frees it (fanout_end.sql).
-- Returns whether it was claimed; if not, what the slot was (NULL: no such slot, or ended); and the
-- fan-out invocations live now, this one included (the rate share; the statement sees the table as
-- it was before its update).
WITH claimed AS (
    UPDATE dispatch_invocations
       SET started_at = now(), until = now() + make_interval(secs => :until_seconds), claimed_by = :owner
     WHERE slot = :slot AND deployment = :deployment AND claimed_by IS NULL AND until > now()
    RETURNING slot
)
SELECT EXISTS (SELECT 1 FROM claimed) AS claimed,
       (SELECT CASE WHEN d.claimed_by IS NOT NULL THEN 'claimed' WHEN d.until <= now() THEN 'expired' END
          FROM dispatch_invocations AS d WHERE d.slot = :slot AND d.deployment = :deployment) AS was,
       (SELECT count(*) FROM dispatch_invocations AS d
         WHERE d.deployment = :deployment AND d.until > now() AND d.slot <> :slot)::integer + 1 AS live
