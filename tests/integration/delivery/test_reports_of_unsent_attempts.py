"""A provider can only report a message or call it was handed. A report naming an attempt that was
never sent (its claim released it before the send started) changes nothing: the intent stays due for
its next attempt, and no attempt row claims the provider took it."""

from __future__ import annotations

import uuid

import pytest

from signup_verification.delivery import reports
from signup_verification.outbox import transitions as t
from signup_verification.outbox.config import FailurePolicy
from support.dispatch import provider_settings
from support.policy import create_with_fallback
from support.reports import sendgrid_event


def _released(db) -> dict:
    """An email step whose fused claim began attempt 1 and gave it back unsent (a shutdown's release)."""
    config = provider_settings().create
    key = uuid.uuid4().hex[:8]
    create_with_fallback(db, config, channel="email", after_seconds=300, key=key, account=f"acct-{key}",
                         email=f"{key}@example.com")  # fmt: skip
    [claimed] = t.claim(db, "worker", 10, 30, begin=True)
    assert t.release(db, "worker", [claimed.fence]) == {claimed.id}
    return {"intent_id": claimed.id, "attempt_id": f"{claimed.id}:1"}


@pytest.mark.parametrize("event", ["bounce", "delivered"])
def test_a_report_of_an_attempt_released_before_its_send_changes_nothing(db, event):
    step = _released(db)
    fields = {"status": "5.1.1", "type": "bounce"} if event == "bounce" else {}
    observation = reports.sendgrid_observation(sendgrid_event(step["intent_id"], step["attempt_id"], event, **fields))
    reports.ingest(db, "sendgrid", [observation], FailurePolicy())
    row = db.one("SELECT status, delivered_at, undeliverable_reason FROM delivery_intents WHERE id = :i",
                 i=step["intent_id"])  # fmt: skip
    assert row == {"status": "retryable", "delivered_at": None, "undeliverable_reason": None}
    log = db.rows("SELECT outcome FROM delivery_attempts WHERE intent_id = :i ORDER BY id", i=step["intent_id"])
    assert [r["outcome"] for r in log] == ["attempting", "released"]
