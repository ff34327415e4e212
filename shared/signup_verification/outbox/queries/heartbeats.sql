-- The workers' heartbeat rows (outbox/heartbeats.py): one file of the outbox package's named statements
-- (platform/catalogue.py).

-- name: heartbeat_start_dispatch
-- Start of a dispatch invocation: the last invocation's latency figures, and this session switched
-- to custom plans: the batched transitions join an unnest() of array parameters whose length a
-- generic plan cannot know (it assumes 10 rows and picks a nested loop that rescans the input per
-- leased row: 500 intents took 300+ ms instead of 40). Planning each execution costs well under a
-- millisecond, a few times per batch.
SELECT set_config('plan_cache_mode', 'force_custom_plan', false) AS plan_mode,
       (SELECT watermark -> 'send_latency_seconds' FROM worker_heartbeats WHERE name = :name) AS latency

-- name: heartbeat_save_latency
-- End of a dispatch invocation: what it measured seeds the next one's batch sizing.
UPDATE worker_heartbeats
   SET watermark = watermark || jsonb_build_object('send_latency_seconds', CAST(:latency AS jsonb))
 WHERE name = :name

-- name: heartbeat_complete_dispatch
-- End of a dispatch invocation (whether or not it claimed anything): last_completed_at, which
-- `verifyctl status` shows as the dispatcher's last completed run.
INSERT INTO worker_heartbeats (name, deployment, last_completed_at)
VALUES (:name, :deployment, now())
ON CONFLICT (name) DO UPDATE SET last_completed_at = now()

-- name: heartbeat_record_claim
-- A dispatch invocation claimed work: last_claim_at (the absence alert reads it) and the latency
-- figures measured so far.
INSERT INTO worker_heartbeats (name, deployment, last_claim_at, watermark)
VALUES (:name, :deployment, now(), jsonb_build_object('send_latency_seconds', CAST(:latency AS jsonb)))
ON CONFLICT (name) DO UPDATE
   SET last_claim_at = now(),
       watermark = worker_heartbeats.watermark || jsonb_build_object('send_latency_seconds', CAST(:latency AS jsonb))

-- name: heartbeat_begin_run
-- Start of a reconcile run: the heartbeat row 'reconcile:<deployment>' records it; the previous
-- watermark comes back so the run can carry `covered_through` forward if it does not drain.
INSERT INTO worker_heartbeats AS h (name, deployment, last_started_at)
VALUES (:name, :deployment, now())
ON CONFLICT (name) DO UPDATE SET last_started_at = now(), deployment = EXCLUDED.deployment
RETURNING h.last_started_at AS started_at, h.watermark AS previous

-- name: heartbeat_complete_run
-- End of a reconcile run: last_completed_at and the watermark (what the run covered).
UPDATE worker_heartbeats
   SET last_completed_at = now(), watermark = :watermark::jsonb || jsonb_build_object('run_completed_at', rfc3339(now()))
 WHERE name = :name
RETURNING last_completed_at

-- name: heartbeat_rows
-- Every heartbeat row with the ages the status table shows.
SELECT name, deployment, last_started_at, last_completed_at, last_claim_at,
       extract(epoch FROM now() - last_completed_at)::float8 AS completed_age_seconds,
       extract(epoch FROM now() - last_claim_at)::float8 AS claim_age_seconds, watermark
  FROM worker_heartbeats
 ORDER BY name
