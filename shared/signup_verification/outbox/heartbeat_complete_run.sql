-- End of a reconcile run: last_completed_at and the watermark (what the run covered).
UPDATE worker_heartbeats
   SET last_completed_at = now(), watermark = :watermark::jsonb || jsonb_build_object('run_completed_at', rfc3339(now()))
 WHERE name = :name
RETURNING last_completed_at
