"""The attempt log and create_events have no foreign key: no attempt row can outlive its
intent, nor be written for an intent that is gone or finished; no create_events row outlives its
verification."""

from __future__ import annotations

import pytest

from signup_verification.outbox import transitions as t
from signup_verification.outbox.config import RetryPolicy
from signup_verification.outbox.transitions import Settlement
from signup_verification.platform.database import Database
from support.factories import deliver, make_verifications, run

from .test_purge import _age_history

ORPHANS = "SELECT count(*) FROM delivery_attempts AS a WHERE NOT EXISTS (SELECT 1 FROM delivery_intents AS i WHERE i.id = a.intent_id)"


def _attempt_counts(db: Database) -> dict[int, int]:
    return {r[0]: r[1] for r in db.run("SELECT intent_id, count(*) FROM delivery_attempts GROUP BY intent_id")}


def test_the_purge_deletes_exactly_the_purged_intents_attempt_rows(db):
    old = make_verifications(db, 2)
    deliver(db)
    _age_history(db, 100)
    kept = make_verifications(db, 1, prefix="fresh")
    deliver(db)
    before = _attempt_counts(db)
    assert len(before) == 3 and all(n == 2 for n in before.values())
    report = run(db)
    assert report.moves["verifications_purged"] == 2
    [[kept_intent]] = db.run("SELECT id FROM delivery_intents WHERE verification_id = :v", v=kept[0])
    assert _attempt_counts(db) == {kept_intent: 2}
    assert db.run(ORPHANS) == [[0]]
    assert db.run("SELECT count(*) FROM verifications WHERE id = ANY(:ids)", ids=old) == [[0]]
    assert [r[0] for r in db.run("SELECT verification_id FROM create_events")] == kept


def test_deleting_intents_with_attempt_rows_is_refused_even_inside_a_retention_transaction(db):
    make_verifications(db, 1)
    deliver(db)
    with pytest.raises(Exception, match="leave their attempt rows behind"):
        with db.transaction() as tx:
            tx.run("SET LOCAL signup_verification.retention_purge = 'on'")
            # the intent is taken along, not its attempt rows (create_events is taken along too)
            tx.run(
                "WITH e AS (DELETE FROM create_events), i AS (DELETE FROM delivery_intents) DELETE FROM verifications"
            )
    assert db.run("SELECT count(*) FROM delivery_intents") == [[1]]
    assert db.run("SELECT count(*) FROM delivery_attempts") == [[2]]


def test_no_statement_appends_an_attempt_row_for_a_finished_or_purged_intent(db):
    make_verifications(db, 2)
    [first, second] = t.claim(db, "w", 2, 30, begin=True, dead_within=0)
    t.start(db, "w", [first.fence, second.fence])
    t.settle(db, "w", [Settlement(i.id, i.lease_version, "accepted") for i in (first, second)])
    rows = db.run("SELECT count(*) FROM delivery_attempts")
    # Finished: every fenced write with the old fences matches nothing and logs nothing.
    fences = [first.fence, second.fence]
    assert t.start(db, "w", fences) == [] and t.begin_attempts(db, "w", fences) == []
    assert t.release(db, "w", fences) == set()
    assert t.settle(db, "w", [Settlement(i.id, i.lease_version, "retryable") for i in (first, second)]) == {}
    assert t.expire_claims(db, 10) == [] and t.lose_leases(db, RetryPolicy(), 10) == []
    assert db.run("SELECT count(*) FROM delivery_attempts") == rows
    # Purged: the same writes name intents that no longer exist.
    _age_history(db, 100)
    assert run(db).moves["verifications_purged"] == 2
    assert t.start(db, "w", fences) == [] and t.begin_attempts(db, "w", fences) == []
    assert t.settle(db, "w", [Settlement(i.id, i.lease_version, "accepted") for i in (first, second)]) == {}
    assert db.run("SELECT count(*) FROM delivery_attempts") == [[0]]


def test_deleting_verifications_without_their_create_events_is_refused(db):
    make_verifications(db, 1)
    with pytest.raises(Exception, match="leave their create_events rows behind"):
        db.run("DELETE FROM verifications")  # no attempt rows yet: only create_events is left behind
    assert db.run("SELECT count(*) FROM verifications") == [[1]]
    with pytest.raises(Exception, match="leave their delivery intents behind"):
        db.run("WITH e AS (DELETE FROM create_events) DELETE FROM verifications")  # no FK either
    with db.transaction() as tx:  # taking them in the same statement is allowed
        tx.run("WITH e AS (DELETE FROM create_events), i AS (DELETE FROM delivery_intents) DELETE FROM verifications")
    assert db.run("SELECT count(*) FROM verifications") == [[0]]
