-- The reconcile run is over: its session advisory lock is released.
SELECT pg_advisory_unlock(hashtextextended(:name, 0))
