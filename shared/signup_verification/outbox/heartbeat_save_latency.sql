-- End of a dispatch invocation: what it measured seeds the next one's batch sizing.
UPDATE worker_heartbeats
   SET watermark = watermark || jsonb_build_object('send_latency_seconds', CAST(:latency AS jsonb))
 WHERE name = :name
