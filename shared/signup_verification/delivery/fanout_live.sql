-- The fan-out invocations of this deployment that may be sending now (each invocation's rate share).
SELECT count(*)::integer AS live FROM dispatch_invocations WHERE deployment = :deployment AND until > now()
