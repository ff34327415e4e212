-- Every heartbeat row with the ages the status table shows.
SELECT name, deployment, last_started_at, last_completed_at, last_claim_at,
       extract(epoch FROM now() - last_completed_at)::float8 AS completed_age_seconds,
       extract(epoch FROM now() - last_claim_at)::float8 AS claim_age_seconds, watermark
  FROM worker_heartbeats
 ORDER BY name
