-- What the scheduled invocation reads before it decides on fan-out: per channel, the intents a claim
-- would take now (the eligible index, counted up to :cap: beyond it the answer is "many"; none of a
-- held or slowed channel; SMS within the hour's budget), and the fan-out invocations live.
WITH counted AS (
    SELECT 'email' AS channel, CASE WHEN channel_held('email') OR channel_slowed('email') THEN 0
           ELSE (SELECT count(*) FROM (SELECT 1 FROM eligible_delivery_intents WHERE channel = 'email' LIMIT :cap) AS e)
           END AS eligible
    UNION ALL
    SELECT 'sms', CASE WHEN channel_held('sms') OR channel_slowed('sms') THEN 0
           ELSE least((SELECT count(*) FROM (SELECT 1 FROM eligible_delivery_intents WHERE channel = 'sms' LIMIT :cap) AS s),
                      coalesce(sms_budget_left(CAST(:sms_max AS integer)), :cap)) END
    UNION ALL
    SELECT 'webhook', CASE WHEN channel_slowed('webhook') THEN 0
           ELSE (SELECT count(*) FROM (SELECT 1 FROM eligible_delivery_intents WHERE channel = 'webhook' LIMIT :cap) AS w)
           END
)
SELECT channel, eligible::integer AS eligible,
       (SELECT count(*) FROM dispatch_invocations WHERE deployment = :deployment AND until > now())::integer AS live
  FROM counted
