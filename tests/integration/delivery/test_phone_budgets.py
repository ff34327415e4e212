"""The phone channels' hourly budgets: calls have their own (VOICE_MAX_PER_HOUR), WhatsApp messages
count in the SMS one (SMS_MAX_PER_HOUR). Past a budget its intents wait unsent and uncharged (never
lost), the other channels keep flowing, the signals alert, and a resume lets the rest go."""

from __future__ import annotations

import re
import uuid

from signup_verification import cli
from signup_verification.operations import signals
from signup_verification.platform.catalogue import catalogue
from support.dispatch import provider_settings, run_dispatch
from support.factories import created


def create(db, settings, channel: str, n: int) -> list[uuid.UUID]:
    return [
        created(db, f"+1{415 + i}5550100", channel=channel, account=f"acct-{channel}-{i}", config=settings.create)
        for i in range(n)
    ]


def statuses(db, channel: str) -> list[tuple[str, int]]:
    rows = db.run("SELECT status, attempts FROM delivery_intents WHERE channel = :c ORDER BY id", c=channel)
    return [tuple(r) for r in rows]


def test_past_the_call_budget_calls_wait_unsent_texts_flow_and_resume_lets_the_rest_go(
    db, twilio, capsys, service_env, monkeypatch
):
    settings = provider_settings(twilio=twilio, voice_max_per_hour=2, sms_max_per_hour=100)
    create(db, settings, "voice", 4)
    create(db, settings, "sms", 2)
    report = run_dispatch(db, settings)
    calls = [d for d in twilio.deliveries if "Twiml" in d.request]
    assert (report.accepted, len(calls), len(twilio.deliveries)) == (4, 2, 4)
    # the two over the budget: still eligible, no attempt charged, nothing failed
    assert statuses(db, "voice") == [("accepted", 1)] * 2 + [("ready", 0)] * 2
    assert db.run("SELECT count(*) FROM eligible_delivery_intents WHERE channel = 'voice'") == [[2]]
    paused = signals.compute(db, "test", settings.signals)
    assert paused.voice_paused and not paused.sms_paused
    assert any(a.startswith("voice: budget of 2 calls per hour spent") for a in paused.alerts())
    assert paused.as_json()["voice_budget"] == {"max_per_hour": 2, "granted": 0, "left": 0, "paused": True}
    assert run_dispatch(db, settings).claimed == 0  # a second invocation takes none

    monkeypatch.setenv("DATABASE_URL", service_env["DATABASE_URL"])
    monkeypatch.setenv("VOICE_MAX_PER_HOUR", "2")
    monkeypatch.setenv("DEPLOYMENT", "test")
    assert cli.main(["status", "--check"]) == cli.EXIT_ALERT
    assert cli.main(["voice", "resume"]) == 0
    assert "Calls resumed: 2 calls left this hour" in capsys.readouterr().out
    assert run_dispatch(db, settings).accepted == 2
    assert statuses(db, "voice") == [("accepted", 1)] * 4


def test_whatsapp_and_sms_share_the_sms_budget_and_never_take_more_than_it_has_left(db, twilio):
    settings = provider_settings(twilio=twilio, sms_max_per_hour=3)
    create(db, settings, "sms", 2)
    create(db, settings, "whatsapp", 2)
    assert run_dispatch(db, settings).accepted == 3  # one claim, both branches: three messages, not four
    waiting = [s for s in statuses(db, "sms") + statuses(db, "whatsapp") if s == ("ready", 0)]
    assert len(waiting) == 1 and len(twilio.deliveries) == 3
    assert db.one("SELECT sms_budget_left(3) AS left")["left"] == 0
    assert signals.compute(db, "test", settings.signals).sms_paused
    assert run_dispatch(db, settings).claimed == 0


def test_the_budgets_read_their_channels_partial_indexes(db):
    """Each budget counts its channels' attempts of the hour on partial indexes of its own, whatever
    the history (SMS and WhatsApp: the text indexes; calls: the voice ones)."""
    for function, indexes in (("sms_budget_left", "text"), ("voice_budget_left", "voice")):
        body = catalogue("outbox", "functions")[function]
        query = re.search(r"AS \$\$(.*)\$\$", body, re.S).group(1).replace("p_max", "10")
        plan = "\n".join(r[0] for r in db.run("EXPLAIN " + query))
        assert f"delivery_attempts_{indexes}_begun" in plan and f"delivery_attempts_{indexes}_unsent" in plan, plan
        assert "Seq Scan on delivery_attempts" not in plan, plan
