"""Duty reap_idempotency_keys: expired keys are deleted in bounded batches."""

from __future__ import annotations

from dataclasses import replace

from support.factories import CONFIG, make_verifications, run


def test_expired_idempotency_keys_are_reaped_and_live_ones_kept(db):
    make_verifications(db, 3)
    db.run("UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE key <> 'acct-email-0'")
    report = run(db, replace(CONFIG, batch_size=1))
    assert report.moves["idempotency_keys_reaped"] == 2
    assert db.run("SELECT key FROM idempotency_keys") == [["acct-email-0"]]
