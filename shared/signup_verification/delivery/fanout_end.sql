-- A fan-out invocation ends: its slot is free for the next.
DELETE FROM dispatch_invocations WHERE slot = :slot AND deployment = :deployment
