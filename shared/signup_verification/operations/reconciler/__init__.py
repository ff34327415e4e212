"""The reconciler: a scheduled safety sweep over the outbox. It never sends.

One module per duty, named by what it does (River's maintenance services: one job each, explicit
config with defaults, one `sweep(context)` shape: duty.py):
    suppress_dead  resolve_ambiguous  expire_claims  lose_leases  count_overdue
    reap_idempotency_keys  reap_refused_creates  redact  purge
duties.py declares them in sweep order; the runner sweeps them, bounds them (batches.py) and records
the watermark (runner.py, watermark.py).
"""
