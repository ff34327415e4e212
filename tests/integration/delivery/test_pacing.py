"""Provider pacing against the fake providers: a 429 (SendGrid) or 20429 (Twilio) spends no attempt,
slows the whole invocation at once and, through channel_pacing, every other invocation's claim for
the provider's Retry-After; sends stay within the configured rate."""

from __future__ import annotations

import threading
import time

import pytest

from signup_verification.delivery.batch_sizing import LatencyEstimator
from signup_verification.outbox import transitions
from signup_verification.platform.database import Database
from support.dispatch import attempts, intent, provider_settings, run_dispatch
from support.fakes.http import Answer, FakeSendGrid
from support.fakes.seed import seed_intents
from support.fakes.twilio import FakeTwilio
from support.waiting import until

TOO_MANY = {"errors": [{"field": None, "message": "too many requests"}]}


@pytest.fixture
def sendgrid():
    with FakeSendGrid() as fake:
        yield fake


def sendgrid_settings(sendgrid, **overrides):
    return provider_settings(
        email_transport="sendgrid",
        sendgrid_api_key=sendgrid.api_key,
        sendgrid_api_url=sendgrid.send_url,
        **overrides,
    )


def slowed(db, channel: str) -> float | None:
    row = db.one(
        "SELECT extract(epoch FROM slow_until - now())::float8 AS left, reason FROM channel_pacing WHERE channel = :c",
        c=channel,
    )
    return None if row is None else row["left"]


def test_a_sendgrid_429_spends_no_attempt_and_the_rest_waits_unsent_until_sendgrid_allows(db, sendgrid):
    """One sender, two emails per batch: the first send meets the 429. What was claimed and not sent
    is given back unsent (the second batch too, when the claim ahead took it before the 429 was
    known), and no claim takes email once SendGrid's wait runs."""
    ids = seed_intents(db, 4)
    sendgrid.script(Answer(429, TOO_MANY, {"Retry-After": "30"}))
    report = run_dispatch(db, sendgrid_settings(sendgrid, send_concurrency_max_email=1))
    assert (sendgrid.requests, report.accepted) == (1, 0)
    assert report.claimed == report.retryable and report.claimed in (2, 4)  # the batch ahead: a race with the 429
    limited = intent(db, ids[0])
    assert limited["status"] == "retryable" and limited["max_attempts"] - limited["attempts"] == 5  # not charged
    assert attempts(db, ids[0])[-1][1:] == ("retryable", "rate_limited")
    claimed = ids[: report.claimed]
    for ahead in claimed[1:]:
        assert attempts(db, ahead)[-1][1:] == ("retryable", "not_sent")  # never handed over
    for waiting in claimed:
        row = intent(db, waiting)
        assert row["max_attempts"] - row["attempts"] == 5
        left = db.one(
            "SELECT extract(epoch FROM next_attempt_at - now()) AS s FROM delivery_intents WHERE id = :i", i=waiting
        )
        assert 25 < left["s"] <= 30  # eligible again when SendGrid allows: no sooner, no backoff beyond it
    assert [intent(db, i)["status"] for i in ids[report.claimed :]] == ["ready"] * (4 - report.claimed)
    assert 25 < slowed(db, "email") <= 30


def test_a_slowed_channel_is_left_alone_by_every_invocations_claim_and_the_others_go_on(db, sendgrid, twilio):
    """Another invocation (a fan-out sibling, the next tick) claims no email while SendGrid's wait runs,
    but still sends SMS; once the wait is over, the email goes too."""
    seed_intents(db, 3, sms_every=3)  # 2 email, 1 SMS
    db.run(
        "INSERT INTO channel_pacing (channel, slow_until, seconds, reason)"
        " VALUES ('email', now() + interval '30 seconds', 30, 'sendgrid: 429')"
    )
    settings = sendgrid_settings(sendgrid, twilio=twilio)
    first = run_dispatch(db, settings)
    assert (first.claimed, first.accepted, sendgrid.requests, len(twilio.deliveries)) == (1, 1, 0, 1)
    db.run("UPDATE channel_pacing SET slow_until = now() - interval '1 second'")
    second = run_dispatch(db, settings)
    assert (second.claimed, second.accepted, sendgrid.requests) == (2, 2, 2)


def test_a_twilio_20429_without_retry_after_slows_sms_for_the_default_wait(db, twilio):
    ids = seed_intents(db, 2, sms_every=1)
    twilio.script(FakeTwilio.error(429, 20429, "Too Many Requests"))
    report = run_dispatch(db, provider_settings(twilio=twilio, send_concurrency=1))
    assert report.accepted == 0 and len(twilio.deliveries) == 0 and twilio.requests == 1
    for intent_id in ids:
        row = intent(db, intent_id)
        assert row["status"] == "retryable" and row["max_attempts"] - row["attempts"] == 5
    assert 0 < slowed(db, "sms") <= 1.0  # pacing.SLOW_DOWN_DEFAULT_SECONDS
    assert [a[2] for a in attempts(db, ids[0])] == [None, "rate_limited"]
    # neither message reached Twilio: the hour's SMS budget is whole
    assert db.one("SELECT sms_budget_left(10) AS left")["left"] == 10


def test_a_429_during_a_batch_pauses_the_senders_of_that_invocation_at_once(db, sendgrid):
    """Eight senders; the provider answers 429 from the fourth request on. The sends that had not
    started when the first 429 came back are not sent at all in this invocation."""
    ids = seed_intents(db, 40)
    sendgrid.default_delay = 0.05
    sendgrid.script(Answer(), Answer(), Answer(), *[Answer(429, TOO_MANY, {"Retry-After": "5"}) for _ in range(37)])
    warm = LatencyEstimator()
    warm.seed({"email": 0.05})  # a warm instance: the first batch holds all 40
    report = run_dispatch(db, sendgrid_settings(sendgrid, send_concurrency_max_email=8), estimator=warm)
    assert (report.batches, report.accepted, report.retryable) == (1, 3, 37)
    assert sendgrid.requests <= 8 + 3  # those in flight when the first 429 came back, not the 40 the batch held
    assert all(
        intent(db, i)["max_attempts"] - intent(db, i)["attempts"] == 5
        for i in ids
        if intent(db, i)["status"] != "accepted"
    )


class Timed(FakeSendGrid):
    """When each message was taken."""

    def __init__(self):
        super().__init__()
        self.taken: list[float] = []

    def parse(self, raw):
        parsed = super().parse(raw)
        self.taken.append(time.monotonic())
        return parsed


def test_email_max_per_second_bounds_what_the_provider_receives(db):
    seed_intents(db, 10)
    with Timed() as fake:
        settings = sendgrid_settings(fake, email_max_per_second=2)
        started = time.monotonic()
        report = run_dispatch(db, settings)
        assert report.accepted == 10
        offsets = sorted(t - started for t in fake.taken)
    # never more than the burst (4) plus 2 per second since the start
    for n, at in enumerate(offsets, 1):
        assert n <= 4 + 2 * at + 1, (n, at)
    assert offsets[-1] >= 2.5


def test_the_slow_down_reaches_a_concurrent_invocation_before_its_next_claim(db, database_url, sendgrid):
    """Two invocations at once: the one that met the 429 publishes the slow-down while its batch is
    still running; the other, starting once it is published, claims no email."""
    seed_intents(db, 30)
    sendgrid.default_delay = 0.2
    sendgrid.script(Answer(429, TOO_MANY, {"Retry-After": "20"}))
    settings = sendgrid_settings(sendgrid, send_concurrency_max_email=2, dispatch_batch_seconds=1)
    reports = []

    def other():
        other_db = Database.from_url(database_url)
        try:
            until(lambda: slowed(other_db, "email"), what="the 429's slow-down published")
            reports.append(run_dispatch(other_db, settings))
        finally:
            other_db.close()

    thread = threading.Thread(target=other)
    thread.start()
    run_dispatch(db, settings)
    thread.join(60)
    assert reports and reports[0].claimed == 0
    assert 15 < slowed(db, "email") <= 20
    assert transitions.claim(db, "w", 10, 30, limits={"email": 10}) == []  # no claim takes email meanwhile
