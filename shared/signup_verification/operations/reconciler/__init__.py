"""The reconciler: a scheduled safety sweep over the outbox. It never sends.

One module per duty (River's maintenance services: one job each, explicit config with defaults):
    dead_verifications  expired_claims  lost_leases  ambiguous  horizon  idempotency_keys  retention
and the runner that orders them, bounds them and records the watermark (runner.py, watermark.py).
"""
from .config import ReconcilerConfig
from .runner import ReconcileReport, reconcile

__all__ = ["ReconcilerConfig", "ReconcileReport", "reconcile"]
