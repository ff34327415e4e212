"""The chaos run's attacker (tools/chaos_attack.py): its checks pass a history where the attacker
delayed nobody, and catch each way it could have: the channel held as a whole, a genuine route
held, a genuine delivery stopped or left waiting, an attacker's destination blamed."""

from __future__ import annotations

import sys
import uuid
from types import SimpleNamespace

from signup_verification.outbox import transitions as t
from signup_verification.outbox.states import AttemptOutcome
from signup_verification.outbox.transitions import Settlement
from support.dispatch import provider_settings, run_dispatch
from support.factories import created
from support.fakes.twilio import FakeTwilio
from support.paths import ROOT

sys.path.insert(0, str(ROOT / "tools"))

from chaos_attack import Attack  # noqa: E402
from chaos_checks import Findings  # noqa: E402
from chaos_faults import REFUSED_21606, REFUSED_PREFIX  # noqa: E402

SETTINGS = dict(rate_limit_prefix_per_hour=1000, rate_limit_account_per_hour=1000)


def _attack(created: set[uuid.UUID]) -> Attack:
    attack = Attack(SimpleNamespace(config=SimpleNamespace(seed=1, intents=100, attack_share=0.04)))
    attack.created = created
    return attack


def _create(db, settings, destination: str) -> uuid.UUID:
    return created(db, destination, config=settings.create)


def test_an_attack_that_delayed_nobody_passes(db):
    with FakeTwilio() as twilio:
        settings = provider_settings(twilio=twilio, route_hold_min_destinations=2, **SETTINGS)
        attackers = set()
        for n in range(3):
            twilio.by_destination[f"{REFUSED_PREFIX}{n:04d}"] = REFUSED_21606
            attackers.add(_create(db, settings, f"{REFUSED_PREFIX}{n:04d}"))
        genuine = _create(db, settings, "+14155550170")
        run_dispatch(db, settings)
        waiting = _create(db, settings, f"{REFUSED_PREFIX}0099")  # the attacker's own route is held: it waits
        attackers.add(waiting)
        run_dispatch(db, settings)
    found = Findings()
    _attack(attackers).check(db, found)
    assert found.ok, dict(found.violations)
    assert found.figures["attack_routes_held"] == 1 and found.figures["attack_route_waits"] == 1
    assert db.one("SELECT status FROM delivery_intents WHERE verification_id = :v", v=genuine)["status"] == "accepted"


def test_each_attack_check_catches_its_violation(db):
    settings = provider_settings(**SETTINGS)
    genuine = _create(db, settings, "user@example.com")
    attacker = _create(db, settings, "victim@evil.example")
    db.run(
        "INSERT INTO channel_holds (channel, route, faults, window_started_at, last_fault_at, category, held_at,"
        " held_until) VALUES ('sms', '', 3, now(), now(), 'sender_misconfigured', now(), now() + interval '1 hour'),"
        " ('email', 'example.com', 5, now(), now(), 'blocked', now(), now() + interval '1 hour')"
    )
    [claimed] = [c for c in t.claim(db, "w", 10, 30) if c.verification_id == genuine]
    t.begin_attempts(db, "w", [claimed.fence])
    t.settle(db, "w", [Settlement(claimed.id, claimed.lease_version, AttemptOutcome.RETRYABLE, 60, "channel_stopped", "x",
                                  attempted=False)])  # fmt: skip
    db.run(
        "INSERT INTO destination_suppressions (channel, destination_key, reason, intent_id)"
        " SELECT 'email', sha256('victim'), 'bounced', id FROM delivery_intents WHERE verification_id = :v",
        v=attacker,
    )
    found = Findings()
    _attack({attacker}).check(db, found)
    messages = {name: " | ".join(v) for name, v in found.violations.items()}
    assert set(messages) == {"attack_channel_held", "attack_route_held", "attack_delayed", "attack_blamed"}, messages
    assert "sms was held as a whole" in messages["attack_channel_held"]
    assert "email:example.com" in messages["attack_route_held"]
    assert str(genuine) in messages["attack_delayed"] and str(attacker) in messages["attack_blamed"]
