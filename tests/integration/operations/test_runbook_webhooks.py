"""docs/runbook.md's "Failing webhook receiver" controlled test, automated: the signup
site's endpoint is down, the event waits (retryable, the webhook signal ages past its page), the
endpoint comes back, the next dispatch delivers it under the same webhook-id. Nothing is lost."""

from __future__ import annotations

import re

from signup_verification.delivery.events import webhook_id
from signup_verification.operations import signals
from signup_verification.verifications import confirm as confirmations
from support.dispatch import KEYRING, run_dispatch
from support.factories import make_verifications
from support.fakes.webhooks import FakeWebhookReceiver
from support.paths import ROOT
from support.webhooks import VERIFIED_ONLY, events, events_database, link_token, webhook_settings


def documented_sequence(name: str) -> list[str]:
    text = (ROOT / "docs" / "runbook.md").read_text()
    match = re.search(rf"<!-- controlled-test: {re.escape(name)} -->\s*```text\n(.*?)```", text, re.S)
    assert match, f"docs/runbook.md has no expected sequence for {name}"
    return [line.rstrip() for line in match.group(1).splitlines() if line.strip()]


def test_a_failing_receiver_delays_the_event_and_loses_nothing(database_url):
    db = events_database(database_url, event_types=VERIFIED_ONLY)  # one event per confirmation
    observed = []
    with FakeWebhookReceiver() as receiver:
        settings = webhook_settings(receiver)
        [vid] = make_verifications(db, 1)
        confirmations.confirm_link(db, KEYRING, link_token(db, vid))
        receiver.down()
        report = run_dispatch(db, settings)
        [event] = events(db)
        error = (event["last_error"] or "").split(":")[0]
        observed.append(f"receiver down: dispatch retryable={report.retryable} event={event['status']} error={error}")
        db.run("UPDATE delivery_intents SET next_attempt_at = now() - interval '700 seconds' WHERE role = 'event'")
        webhook = signals.compute(db, "test").channel("webhook")
        observed.append(
            f"700 s later: webhook ready_count={webhook.ready_count} "
            f"oldest>600={webhook.oldest_ready_verification_seconds > 600}"
        )
        receiver.up()
        report = run_dispatch(db, settings)
        webhook = signals.compute(db, "test").channel("webhook")
        same = receiver.webhook_ids() == [webhook_id(vid, "verification.verified")]
        observed.append(
            f"receiver back: dispatch accepted={report.accepted} received={len(receiver.events())} "
            f"same_webhook_id={same} ready_count={webhook.ready_count}"
        )
    db.close()
    assert observed == documented_sequence("failing-receiver")
