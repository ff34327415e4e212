-- A fan-out invocation starts: its slot (reserved by the scheduled invocation that enqueued it) lives
-- until this invocation's own deadline. Returns the fan-out invocations live now, this one included
-- (the rate share; the statement sees the table as it was before its update).
WITH started AS (
    UPDATE dispatch_invocations SET started_at = now(), until = now() + make_interval(secs => :until_seconds)
     WHERE slot = :slot AND deployment = :deployment
)
SELECT count(*) FILTER (WHERE slot <> :slot)::integer + 1 AS live
  FROM dispatch_invocations WHERE deployment = :deployment AND until > now()
