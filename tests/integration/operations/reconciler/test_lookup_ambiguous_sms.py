"""Ambiguous SMS resolved by asking Twilio's Messages list API: found -> accepted with its
sid, provably absent -> retried once, unsure or failing lookups -> left as they are. Never sends."""

from __future__ import annotations

import dataclasses

import pytest

from signup_verification.operations.config import SmsLookupConfig
from signup_verification.operations.reconciler.runner import reconcile
from support.dispatch import attempts, provider_settings, run_dispatch
from support.fakes.http import Answer
from support.fakes.seed import seed_intents
from support.fakes.twilio import FakeTwilio


@pytest.fixture
def twilio():
    with FakeTwilio() as fake:
        yield fake


def ambiguous_sms(db, twilio, n=1, created=True):
    """n SMS whose send answered 500 after Twilio created the message (created) or not."""
    twilio.script(*[FakeTwilio.error(500, 20500, "Internal Server Error", deliver=created) for _ in range(n)])
    seed_intents(db, n, sms_every=1)
    settings = provider_settings(twilio=twilio)
    assert run_dispatch(db, settings).ambiguous == n
    return settings


def reconcile_with_lookup(db, settings, twilio, **overrides):
    lookup = SmsLookupConfig(
        account_sid=twilio.account_sid, auth_token=twilio.auth_token, sender="+15005550006", api_url=twilio.url,
        min_interval_seconds=0.0, **overrides,
    )  # fmt: skip
    config = dataclasses.replace(settings.reconciler, sms_lookup=lookup)
    return reconcile(db, config, emit_signals=False)


def intents(db):
    return db.rows("SELECT id, status, provider_ref, attempts FROM delivery_intents ORDER BY id")


def test_found_message_is_accepted_with_its_sid(db, twilio):
    settings = ambiguous_sms(db, twilio)
    sent_before = twilio.requests
    report = reconcile_with_lookup(db, settings, twilio)
    [row] = intents(db)
    [delivery] = twilio.deliveries
    assert row["status"] == "accepted" and row["provider_ref"] == twilio.message(delivery)["sid"]
    assert report.moves["ambiguous_lookup_to_accepted"] == 1
    assert twilio.requests == sent_before  # looked up (GET), never sent
    assert [a[1] for a in attempts(db, row["id"])][-1] == "accepted"
    [asked] = twilio.list_requests
    assert "To=%2B1415" in asked and "From=%2B15005550006" in asked


def test_absent_message_is_retried_once_the_listing_has_settled(db, twilio):
    settings = ambiguous_sms(db, twilio, created=False)
    report = reconcile_with_lookup(db, settings, twilio, settle_seconds=0.001)
    [row] = intents(db)
    assert row["status"] == "retryable" and report.moves["ambiguous_lookup_to_retryable"] == 1
    assert run_dispatch(db, settings).accepted == 1 and len(twilio.deliveries) == 1  # sent exactly once


def test_absent_but_not_settled_stays_ambiguous(db, twilio):
    settings = ambiguous_sms(db, twilio, created=False)
    reconcile_with_lookup(db, settings, twilio, settle_seconds=3600)
    assert intents(db)[0]["status"] == "ambiguous"


@pytest.mark.parametrize(
    "answer", [FakeTwilio.error(500, 20500), FakeTwilio.error(429, 20429), Answer(200, {"x": 1}), Answer(200, None)]
)
def test_a_failing_lookup_leaves_the_intent_as_it_is(db, twilio, answer):
    settings = ambiguous_sms(db, twilio, created=False)
    twilio.list_answers.append(answer)
    report = reconcile_with_lookup(db, settings, twilio, settle_seconds=0.001)
    assert intents(db)[0]["status"] == "ambiguous" and report.moves["lookup_failed"] == 1
    assert report.moves["ambiguous_lookup_to_retryable"] == 0


def test_bad_credentials_stop_the_lookups_for_the_run(db, twilio):
    settings = ambiguous_sms(db, twilio, n=3)
    real = twilio.auth_token
    twilio.auth_token = "rotated"  # the fake now refuses the reconciler's credentials: 401
    lookup = SmsLookupConfig(twilio.account_sid, real, "+15005550006", twilio.url, min_interval_seconds=0.0)
    reconcile(db, dataclasses.replace(settings.reconciler, sms_lookup=lookup), emit_signals=False)
    assert len(twilio.list_requests) == 1  # the first 401 stops the duty: no hammering
    assert {r["status"] for r in intents(db)} == {"ambiguous"}


def test_calls_per_run_are_bounded(db, twilio):
    settings = ambiguous_sms(db, twilio, n=3)
    report = reconcile_with_lookup(db, settings, twilio, max_calls=2)
    assert len(twilio.list_requests) == 2 and report.moves["ambiguous_lookup_to_accepted"] == 2
    assert [r["status"] for r in intents(db)].count("ambiguous") == 1


def test_lookups_follow_the_twilio_settings(db, twilio):
    settings = ambiguous_sms(db, twilio)
    assert settings.reconciler.sms_lookup is not None  # SMS_TRANSPORT=twilio with credentials: on by default
    assert provider_settings(twilio=twilio, sms_lookup="off").reconciler.sms_lookup is None
    report = reconcile(db, dataclasses.replace(settings.reconciler, sms_lookup=None), emit_signals=False)
    assert intents(db)[0]["status"] == "ambiguous" and twilio.list_requests == []
    assert any(d.duty == "lookup_ambiguous_sms" and d.skipped for d in report.duties)


def test_a_message_another_attempt_explains_is_not_proof_of_this_one(db, twilio):
    """Review: an older signup's SMS to the same number, created inside the window, must not settle a
    newer attempt that Twilio never created as accepted (its code would never be sent)."""
    settings = ambiguous_sms(db, twilio)
    [delivery] = twilio.deliveries
    sid = twilio.message(delivery)["sid"]
    db.run(  # the message is another attempt's: an accepted attempt of an older intent names its sid
        "INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version,"
        " outcome, provider_ref) VALUES ('999999:1', 999999, 1, 'sms', 'v1', 'accepted', :sid)",
        sid=sid,
    )
    report = reconcile_with_lookup(db, settings, twilio, settle_seconds=0.001)
    [row] = intents(db)
    assert row["status"] == "retryable" and row["provider_ref"] != sid
    assert report.moves["ambiguous_lookup_to_retryable"] == 1
