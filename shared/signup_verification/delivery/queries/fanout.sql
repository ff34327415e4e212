-- The fan-out's slots and backlog (delivery/fanout.py): one file of the delivery package's named
-- statements (platform/catalogue.py).

-- name: fanout_reserve
-- The scheduled invocation reserves up to :wanted fan-out slots (fanout_reserve), and learns how
-- many fan-out invocations are live with them.
SELECT slots, live FROM fanout_reserve(:deployment, :owner, CAST(:wanted AS integer), CAST(:max AS integer),
                                       make_interval(secs => :until_seconds))

-- name: fanout_begin
-- A fan-out invocation claims its slot: the row a scheduled invocation of this deployment reserved,
-- still live and never claimed, taken in this one UPDATE (two deliveries of one task: the second
-- waits on the row, then finds it claimed). Claimed, it lives until this invocation's own deadline
-- and names its claimant, so only that invocation frees it (delivery/queries/fanout.sql:fanout_end).
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

-- name: fanout_end
-- A fan-out invocation ends: the slot it claimed is free for the next (never another's claim).
DELETE FROM dispatch_invocations WHERE slot = :slot AND deployment = :deployment AND claimed_by = :owner

-- name: fanout_live
-- The fan-out invocations of this deployment that may be sending now (each invocation's rate share).
SELECT count(*)::integer AS live FROM dispatch_invocations WHERE deployment = :deployment AND until > now()

-- name: fanout_backlog
-- What the scheduled invocation reads before it decides on fan-out: per channel, the intents a claim
-- would take now (the eligible index, counted up to :cap: beyond it the answer is "many"; none of a
-- held or slowed channel; SMS and WhatsApp within the hour's SMS budget, calls within theirs), and the
-- fan-out invocations live.
WITH counted AS (
    SELECT 'email' AS channel, CASE WHEN channel_held('email') OR channel_slowed('email') THEN 0
           ELSE (SELECT count(*) FROM (SELECT 1 FROM eligible_delivery_intents WHERE channel = 'email' LIMIT :cap) AS e)
           END AS eligible
    UNION ALL
    SELECT 'sms', CASE WHEN channel_held('sms') OR channel_slowed('sms') THEN 0
           ELSE least((SELECT count(*) FROM (SELECT 1 FROM eligible_delivery_intents WHERE channel = 'sms' LIMIT :cap) AS s),
                      coalesce(sms_budget_left(CAST(:sms_max AS integer)), :cap)) END
    UNION ALL
    SELECT 'whatsapp', CASE WHEN channel_held('whatsapp') OR channel_slowed('whatsapp') THEN 0
           ELSE least((SELECT count(*) FROM (SELECT 1 FROM eligible_delivery_intents WHERE channel = 'whatsapp' LIMIT :cap) AS a),
                      coalesce(sms_budget_left(CAST(:sms_max AS integer)), :cap)) END
    UNION ALL
    SELECT 'voice', CASE WHEN channel_held('voice') OR channel_slowed('voice') THEN 0
           ELSE least((SELECT count(*) FROM (SELECT 1 FROM eligible_delivery_intents WHERE channel = 'voice' LIMIT :cap) AS c),
                      coalesce(voice_budget_left(CAST(:voice_max AS integer)), :cap)) END
    UNION ALL
    SELECT 'webhook', CASE WHEN channel_slowed('webhook') THEN 0
           ELSE (SELECT count(*) FROM (SELECT 1 FROM eligible_delivery_intents WHERE channel = 'webhook' LIMIT :cap) AS w)
           END
)
SELECT channel, eligible::integer AS eligible,
       (SELECT count(*) FROM dispatch_invocations WHERE deployment = :deployment AND until > now())::integer AS live
  FROM counted
