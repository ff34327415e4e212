"""The chaos run's webhook invariants (tools/chaos_webhooks.py) hold for a clean delivery
and catch each violation they are meant to catch."""

from __future__ import annotations

import dataclasses
import sys

from signup_verification.verifications import confirm as confirmations
from support.dispatch import KEYRING, run_dispatch
from support.factories import make_verifications
from support.fakes.webhooks import FakeWebhookReceiver
from support.paths import ROOT
from support.webhooks import link_token, webhook_settings

sys.path.insert(0, str(ROOT / "tools"))

from chaos_checks import Findings  # noqa: E402
from chaos_webhooks import check  # noqa: E402


def _delivered(edb, receiver, n=2):
    ids = make_verifications(edb, n)
    for vid in ids:
        confirmations.confirm_link(edb, KEYRING, link_token(edb, vid))
    assert run_dispatch(edb, webhook_settings(receiver)).accepted == 2 * n  # verification.verified and .proved
    return ids


def test_a_clean_delivery_keeps_every_webhook_invariant(edb):
    with FakeWebhookReceiver() as receiver:
        _delivered(edb, receiver)
    found = Findings()
    check(edb, receiver, found)
    assert found.ok, dict(found.violations)
    assert found.figures["webhook_events"] == {"verification.verified": 2, "verification.proved": 2}
    assert found.figures["webhook_receipts"] == 4


def test_each_webhook_check_catches_its_violation(edb, db):
    with FakeWebhookReceiver() as receiver:
        _delivered(edb, receiver)
    first, second, *_ = receiver.deliveries
    receiver.deliveries.append(first)  # a second receipt without a recorded ambiguous attempt
    receiver.deliveries.append(dataclasses.replace(second, destination="msg_other"))  # another id for one event
    receiver.refused = 1
    [unannounced] = make_verifications(db, 1, prefix="off")  # verified with webhooks off: no event
    confirmations.confirm_link(db, KEYRING, link_token(db, unannounced))
    edb.run(
        "UPDATE delivery_intents SET status = 'retryable', completed_at = NULL WHERE id = "
        "(SELECT max(id) FROM delivery_intents WHERE role = 'event')"
    )
    found = Findings()
    check(edb, receiver, found)
    assert set(found.violations) >= {
        "webhook_unexplained_duplicate",
        "webhook_id_changed",
        "webhook_signature",
        "webhook_event_count",
        "webhook_lost",
    }, dict(found.violations)
