-- Start of a dispatch invocation: the last invocation's latency figures, and this session switched
-- to custom plans: the batched transitions join an unnest() of array parameters whose length a
-- generic plan cannot know (it assumes 10 rows and picks a nested loop that rescans the input per
-- leased row: 500 intents took 300+ ms instead of 40). Planning each execution costs well under a
-- millisecond, a few times per batch.
SELECT set_config('plan_cache_mode', 'force_custom_plan', false) AS plan_mode,
       (SELECT watermark -> 'send_latency_seconds' FROM worker_heartbeats WHERE name = :name) AS latency
