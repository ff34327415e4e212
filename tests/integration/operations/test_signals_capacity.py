"""The signals that warn before links expire or SMS pause: the ready backlog's drain time at the
measured send rate against the link TTL, how much of the hour's SMS budget is used (a warning at
80 %), a provider's slow-down and the fan-out, in the records, the JSON and `verifyctl status`."""

from __future__ import annotations

from signup_verification.operations import signal_records, signals, status_table
from signup_verification.operations.signals import SignalsConfig, drain_seconds
from support.factories import make_verifications


def begun(db, channel: str, count: int) -> None:
    """`count` sends begun in the window (attempt rows), as the dispatcher writes them."""
    db.run(
        "INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version, lease_owner,"
        " lease_version, outcome, attempted_at) SELECT id || ':' || n, id, n, channel, template_version, 'w', 1,"
        " 'attempting', now() FROM delivery_intents, generate_series(1, :count) AS n WHERE channel = :channel"
        " AND id = (SELECT min(id) FROM delivery_intents WHERE channel = :channel)",
        count=count,
        channel=channel,
    )


def test_the_drain_time_is_the_backlog_at_the_rate_sends_began():
    assert drain_seconds(0, 0, 300) == 0.0
    assert drain_seconds(600, 300, 300) == 600.0  # one send a second: ten minutes for 600
    assert drain_seconds(10, 0, 300) is None  # nothing began: no rate to measure


def test_a_backlog_that_drains_slower_than_links_live_is_an_alert_and_in_status(db):
    make_verifications(db, 30)
    begun(db, "email", 5)  # 5 sends in 300 s: 30 ready take 1,800 s, the TTL is 600 s
    config = SignalsConfig(window_seconds=300, ttl_seconds=600)
    snapshot = signals.compute(db, "test", config)
    email = snapshot.channel("email")
    assert email.drain_seconds == 1800.0
    [alert] = [a for a in snapshot.alerts() if "drain" in a]
    assert alert.startswith("email: 30 ready drain in ~30 min") and "links will expire unsent" in alert
    table = status_table.render(snapshot)
    assert "30 min > TTL" in table
    fields = signal_records.record_fields(snapshot, email, "dispatch")
    assert fields["drain_seconds"] == 1800.0 and fields["slowed_seconds"] == 0.0
    assert not [a for a in signals.compute(db, "test", SignalsConfig(ttl_seconds=3600)).alerts() if "drain" in a]


def test_the_sms_budget_shows_its_use_and_warns_at_80_percent(db):
    make_verifications(db, 9, channel="sms")
    begun(db, "sms", 8)
    snapshot = signals.compute(db, "test", SignalsConfig(sms_max_per_hour=10))
    assert (snapshot.sms_budget_used, snapshot.sms_budget_total, snapshot.sms_budget_used_percent) == (8, 10, 80.0)
    assert not snapshot.sms_paused
    [warning] = [a for a in snapshot.alerts() if a.startswith("sms:")]
    assert "80 % of this hour's budget (8 of 10) used" in warning
    assert "sms budget: 8 of 10 this hour (80 %)" in status_table.render(snapshot)
    sms = signal_records.record_fields(snapshot, snapshot.channel("sms"), "dispatch")
    assert sms["sms_budget_used_percent"] == 80.0  # what infra's warning metric counts (>= 80)
    assert snapshot.as_json()["sms_budget"]["used"] == 8
    db.run(
        "INSERT INTO sms_budget_grants (hour, extra, granted_by) VALUES (date_trunc('hour', now(), 'UTC'), 10, 'op')"
    )
    granted = signals.compute(db, "test", SignalsConfig(sms_max_per_hour=10))
    assert (granted.sms_budget_total, granted.sms_budget_used_percent) == (20, 40.0)
    assert not [a for a in granted.alerts() if a.startswith("sms:")]


def test_a_slow_down_and_the_fan_out_show_in_status(db):
    db.run(
        "INSERT INTO channel_pacing (channel, slow_until, seconds, reason)"
        " VALUES ('email', now() + interval '40 seconds', 40, 'sendgrid 429')"
    )
    db.run(
        "INSERT INTO dispatch_invocations (slot, deployment, started_by, until) VALUES"
        " ('p/1', 'test', 'p', now() + interval '1 minute'), ('p/2', 'other', 'p', now() + interval '1 minute')"
    )
    snapshot = signals.compute(db, "test")
    assert 35 < snapshot.channel("email").slowed_seconds <= 40 and snapshot.channel("sms").slowed_seconds == 0
    assert snapshot.fanout_live == 1  # this deployment's only
    table = status_table.render(snapshot)
    assert (
        "email: the provider asked us to slow down" in table and "fan-out: 1 more dispatch invocation(s) live" in table
    )
