"""A provider's report about an earlier attempt that may have been sent (it ended ambiguous) settles
the intent when no later attempt was handed to a provider: the later attempt was only begun by a claim
(claimed ahead, not started), or given back unsent. The report proves the earlier message was created,
so the step ends with the report's verdict, the begun attempt ends released and its start is fenced
out: no second message goes to the person. A later attempt already handed to the provider is left to
its own settle: the report of the earlier one changes nothing."""

from __future__ import annotations

import uuid

import pytest

from signup_verification.outbox import transitions as t
from signup_verification.outbox.transitions import Settlement
from support.reports import claimed_again, report_first_attempt


def _log(db, intent_id: int) -> list[tuple[int, str]]:
    rows = db.rows(
        "SELECT attempt_number, outcome FROM delivery_attempts WHERE intent_id = :i ORDER BY id", i=intent_id
    )
    return [(r["attempt_number"], r["outcome"]) for r in rows]


def _fallback(db, vid: uuid.UUID) -> dict:
    return db.one("SELECT status, next_attempt_at <= now() AS due FROM delivery_intents"
                  " WHERE verification_id = :v AND role = 'fallback'", v=vid)  # fmt: skip


@pytest.mark.parametrize("given_back", [False, True], ids=["claimed-ahead", "released"])
def test_a_bounce_of_the_ambiguous_attempt_ends_the_step_before_the_next_is_sent(db, given_back):
    second, vid = claimed_again(db)
    if given_back:
        assert t.release(db, "w2", [second.fence]) == {second.id}
    report_first_attempt(db, second.id, "bounce")
    row = db.one("SELECT status, lease_owner, undeliverable_reason FROM delivery_intents WHERE id = :i", i=second.id)
    assert (row["status"], row["lease_owner"]) == ("failed", None) and "bounce" in row["undeliverable_reason"]
    log = _log(db, second.id)  # the settlement of attempt 1 and the end of attempt 2, in either order
    assert log[:3] == [(1, "attempting"), (1, "ambiguous"), (2, "attempting")]
    assert sorted(log[3:]) == [(1, "accepted"), (2, "released")]
    assert t.start(db, "w2", [second.fence]) == []  # never handed to the provider
    assert _fallback(db, vid) == {"status": "ready", "due": True}  # the next step comes forward


@pytest.mark.parametrize("given_back", [False, True], ids=["claimed-ahead", "released"])
def test_a_delivery_of_the_ambiguous_attempt_ends_the_step_before_the_next_is_sent(db, given_back):
    second, _ = claimed_again(db)
    if given_back:
        t.release(db, "w2", [second.fence])
    report_first_attempt(db, second.id, "delivered")
    row = db.one("SELECT status, lease_owner, delivered_at IS NOT NULL AS delivered FROM delivery_intents WHERE id = :i",
                 i=second.id)  # fmt: skip
    assert row == {"status": "accepted", "lease_owner": None, "delivered": True}
    assert (2, "released") in _log(db, second.id) and (1, "accepted") in _log(db, second.id)
    assert t.start(db, "w2", [second.fence]) == []


def test_a_report_of_the_earlier_attempt_leaves_a_later_one_already_sent_to_its_settle(db):
    second, _ = claimed_again(db)
    assert len(t.start(db, "w2", [second.fence])) == 1  # handed to the provider
    report_first_attempt(db, second.id, "bounce")
    assert db.one("SELECT status FROM delivery_intents WHERE id = :i", i=second.id)["status"] == "attempting"
    assert t.settle(db, "w2", [Settlement(second.id, second.lease_version, "accepted", provider_ref="m2")]) == {
        second.id: "accepted"
    }
