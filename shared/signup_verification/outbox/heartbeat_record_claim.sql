-- A dispatch invocation claimed work: last_claim_at (the absence alert reads it) and the latency
-- figures measured so far.
INSERT INTO worker_heartbeats (name, deployment, last_claim_at, watermark)
VALUES (:name, :deployment, now(), jsonb_build_object('send_latency_seconds', CAST(:latency AS jsonb)))
ON CONFLICT (name) DO UPDATE
   SET last_claim_at = now(),
       watermark = worker_heartbeats.watermark || jsonb_build_object('send_latency_seconds', CAST(:latency AS jsonb))
