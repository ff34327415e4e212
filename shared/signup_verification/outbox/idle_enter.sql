-- An invocation starts waiting for work: it becomes the deployment's idle waiter unless a newer
-- invocation (by start time, the database clock) already is. The older waiter sees this in its next
-- probe (idle_probe.sql: superseded) and returns, so the scheduler's next tick hands the waiting
-- over without a gap and without two instances waiting for long. An owner that died simply has
-- an older start and is replaced.
INSERT INTO worker_heartbeats (name, deployment, watermark)
VALUES (:name, :deployment, jsonb_build_object(
        'idle_owner', CAST(:owner AS text),
        'idle_owner_started', now() - make_interval(secs => :elapsed)))
ON CONFLICT (name) DO UPDATE
   SET watermark = worker_heartbeats.watermark || EXCLUDED.watermark
 WHERE coalesce(CAST(worker_heartbeats.watermark ->> 'idle_owner_started' AS timestamptz), '-infinity')
       <= CAST(EXCLUDED.watermark ->> 'idle_owner_started' AS timestamptz)
