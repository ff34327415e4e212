"""The reconciler: a scheduled safety sweep over the outbox. It never sends.

One duty per job (River's maintenance services: one job each, explicit config with defaults, one
`sweep(context)` shape: duty.py). A duty that is a statement repeated in bounded batches is a row of
duties.BATCHED (expire_claims, lose_leases, reap_idempotency_keys, reap_refused_creates); the others
are a module each, named by what they do (suppress_dead, lookup_ambiguous_twilio, resolve_ambiguous,
count_overdue, redact, purge). duties.py declares them in sweep order; the runner sweeps them,
bounds them (batches.py) and records the watermark (runner.py, watermark.py).
"""
