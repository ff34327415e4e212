-- A fan-out invocation ends: the slot it claimed is free for the next (never another's claim).
DELETE FROM dispatch_invocations WHERE slot = :slot AND deployment = :deployment AND claimed_by = :owner
