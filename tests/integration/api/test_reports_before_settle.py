"""Reports about an attempt whose send is not settled yet, on a real PostgreSQL: a Twilio callback
links by the attempt its signed URL names (a changed URL is refused); a SendGrid event links by its
custom_args. A final report is applied by the settle that accepts the attempt, once, whichever of the
two commits first; a delivery reported first is kept."""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit

import pytest

from signup_verification.delivery import reports
from signup_verification.delivery.channels.twilio import status_callback_url
from signup_verification.outbox import transitions as t
from signup_verification.outbox.config import ChannelPolicy, FailurePolicy, RetryPolicy
from signup_verification.outbox.transitions import Settlement
from signup_verification.platform.database import Database
from support.dispatch import provider_settings
from support.factories import expire_leases
from support.policy import create_with_fallback
from support.races import held_while
from support.reports import REPORTS_URL, post_sendgrid, reports_env, sendgrid_event, twilio_form, twilio_post


@pytest.fixture
def client(app_client, monkeypatch):
    for name, value in reports_env().items():
        monkeypatch.setenv(name, value)
    return app_client("delivery_reports")


def in_flight(db, channel: str) -> dict:
    """A verification whose first step (`channel`, a fallback on the other channel waiting 300 s) is
    claimed and begun, its send not settled: {intent_id, lease_version, attempt_id, fallback_id}."""
    config = provider_settings(rate_limit_prefix_per_hour=10_000, rate_limit_client_per_hour=10_000).create
    key = uuid.uuid4().hex[:8]
    vid = create_with_fallback(db, config, channel=channel, after_seconds=300, key=key, account=f"acct-{key}",
                               email=f"{key}@example.com")  # fmt: skip
    [claimed] = t.claim(db, "worker", 10, 30)
    [begun] = t.begin_attempts(db, "worker", [claimed.fence])
    fallback = db.one("SELECT id FROM delivery_intents WHERE verification_id = :v AND role = 'fallback'", v=vid)
    return {"intent_id": claimed.id, "lease_version": claimed.lease_version, "attempt_id": begun.attempt_id,
            "fallback_id": fallback["id"]}  # fmt: skip


def settle(db, step: dict, ref: str) -> dict[int, str]:
    return t.settle(db, "worker", [Settlement(step["intent_id"], step["lease_version"], "accepted", provider_ref=ref)])


def intent(db, intent_id: int) -> dict:
    return db.one("SELECT * FROM delivery_intents WHERE id = :id", id=intent_id)


def observed(db) -> int:
    return db.one("SELECT count(*) AS n FROM delivery_observations")["n"]


def post_named(client, form: dict[str, str], signed_for: str, posted_to: str):
    """A callback signed for the StatusCallback `signed_for` (a query naming an attempt), posted to
    the target with the query of `posted_to`."""
    body, headers = twilio_post(form, url=signed_for)
    return client.post("/twilio?" + posted_to.partition("?")[2], data=body, headers=headers)


def test_a_callback_links_by_the_attempt_its_signed_url_names_before_the_settle(client, db):
    step = in_flight(db, "sms")
    url = status_callback_url(REPORTS_URL + "/twilio", step["attempt_id"])
    sid = "SM" + uuid.uuid4().hex
    answer = post_named(client, twilio_form(sid, "failed", ErrorCode="30003"), url, url).get_json()
    assert (answer["stored"], answer["unknown"], answer["undeliverable"]) == (1, 0, 0)  # the settle applies it
    assert settle(db, step, sid) == {step["intent_id"]: "undeliverable"}
    row = intent(db, step["intent_id"])
    assert (row["failure_category"], row["failure_code"], row["failure_provider"]) == ("unreachable", "30003", "twilio")
    assert row["undeliverable_reason"].startswith("failed")
    assert intent(db, step["fallback_id"])["brought_forward_at"] is not None


@pytest.mark.parametrize("ingested", ["in flight", "ambiguous"])
def test_a_final_report_settles_an_ambiguous_send_once_and_the_lookup_applies_nothing_again(client, db, ingested):
    """The send timed out after its request (ambiguous); its report, come while it was in flight or
    after, proves Twilio created the message: the step fails for good with the report's reason at
    once, the next one comes forward, and the reconciler's lookup, which would find the message,
    changes nothing."""
    step = in_flight(db, "sms")
    sid = "SM" + uuid.uuid4().hex
    url = status_callback_url(REPORTS_URL + "/twilio", step["attempt_id"])
    form = twilio_form(sid, "undelivered", ErrorCode="30003")
    if ingested == "in flight":
        assert post_named(client, form, url, url).get_json()["stored"] == 1
    ambiguous = Settlement(step["intent_id"], step["lease_version"], "ambiguous", delay_seconds=60,
                           error_class="timeout_after_send")  # fmt: skip
    settled = t.settle(db, "worker", [ambiguous])
    assert settled == {step["intent_id"]: "undeliverable" if ingested == "in flight" else "ambiguous"}
    if ingested == "ambiguous":
        assert post_named(client, form, url, url).get_json()["undeliverable"] == 1
    row = intent(db, step["intent_id"])
    assert (row["status"], row["failure_category"], row["failure_code"]) == ("failed", "unreachable", "30003")
    assert row["undeliverable_reason"] is not None and row["delivered_at"] is None
    assert row["ambiguous_count"] == 1  # its ambiguous outcome is counted, whatever the report made of it
    forward = intent(db, step["fallback_id"])["brought_forward_at"]
    assert forward is not None
    logged = db.rows("SELECT outcome, error_class FROM delivery_attempts WHERE intent_id = :i ORDER BY id",
                     i=step["intent_id"])  # fmt: skip
    assert [(r["outcome"], r["error_class"]) for r in logged][1:] == [
        ("ambiguous", "timeout_after_send"),
        ("accepted", "provider_report"),
    ]
    # the lookup duty no longer finds it ambiguous; the transition itself moves nothing either
    assert db.rows("SELECT 1 FROM delivery_intents WHERE status = 'ambiguous'") == []
    assert t.resolve_by_lookup(db, [(step["intent_id"], step["attempt_id"], sid)]) == {}
    again = intent(db, step["intent_id"])
    assert (again["status"], again["failed_at"], again["completed_at"]) == (
        "failed",
        row["failed_at"],
        row["completed_at"],
    )
    assert intent(db, step["fallback_id"])["brought_forward_at"] == forward
    assert len(db.rows("SELECT 1 FROM delivery_attempts WHERE intent_id = :i", i=step["intent_id"])) == 3


def test_a_final_report_before_the_worker_died_fails_the_step_when_its_lease_is_lost(client, db):
    """The report came while the send was in flight and the worker died before its settle: the
    reconciler's lost-lease sweep applies the report (it was sent) instead of leaving the intent to
    the ambiguity policy."""
    step = in_flight(db, "sms")
    url = status_callback_url(REPORTS_URL + "/twilio", step["attempt_id"])
    sid = "SM" + uuid.uuid4().hex
    assert post_named(client, twilio_form(sid, "undelivered", ErrorCode="30003"), url, url).get_json()["stored"] == 1
    expire_leases(db)
    assert t.lose_leases(db, RetryPolicy(), 10) == [(step["intent_id"], "sms")]
    row = intent(db, step["intent_id"])
    assert (row["status"], row["failure_category"], row["failure_code"]) == ("failed", "unreachable", "30003")
    assert row["undeliverable_reason"] is not None
    assert intent(db, step["fallback_id"])["brought_forward_at"] is not None
    # the settlement names the message the report is about: the dead worker never recorded one
    logged = db.rows("SELECT outcome, error_class, provider_ref FROM delivery_attempts WHERE intent_id = :i"
                     " ORDER BY id", i=step["intent_id"])  # fmt: skip
    assert [(r["outcome"], r["error_class"], r["provider_ref"]) for r in logged] == [
        ("attempting", None, None),
        ("ambiguous", "lease_lost", None),
        ("accepted", "provider_report", sid),
    ]
    assert row["provider_ref"] == sid
    assert t.resolve_ambiguous(db, RETRY_AT_ONCE, 10) == []


def test_a_delivery_reported_before_the_worker_died_accepts_the_step_when_its_lease_is_lost(client, db):
    """The message was delivered and Twilio said so while the send was in flight; the worker died
    before its settle: the lost-lease sweep settles the attempt as sent (accepted, naming the message)
    instead of leaving it to the ambiguity policy, which would send the code again."""
    step = in_flight(db, "sms")
    url = status_callback_url(REPORTS_URL + "/twilio", step["attempt_id"])
    sid = "SM" + uuid.uuid4().hex
    assert post_named(client, twilio_form(sid, "delivered"), url, url).get_json()["delivered"] == 1
    expire_leases(db)
    assert t.lose_leases(db, RetryPolicy(), 10) == [(step["intent_id"], "sms")]
    row = intent(db, step["intent_id"])
    assert (row["status"], row["delivered_at"] is not None, row["provider_ref"]) == ("accepted", True, sid)
    assert (row["last_error"], row["failed_at"], row["ambiguous_count"]) == (None, None, 1)
    logged = db.rows("SELECT outcome, error_class, provider_ref FROM delivery_attempts WHERE intent_id = :i"
                     " ORDER BY id", i=step["intent_id"])  # fmt: skip
    assert [(r["outcome"], r["error_class"], r["provider_ref"]) for r in logged] == [
        ("attempting", None, None),
        ("ambiguous", "lease_lost", None),
        ("accepted", "provider_report", sid),
    ]
    assert t.resolve_ambiguous(db, RETRY_AT_ONCE, 10) == []
    assert intent(db, step["fallback_id"])["brought_forward_at"] is None


def test_a_callback_whose_url_names_another_attempt_than_twilio_signed_is_refused(client, db):
    step = in_flight(db, "sms")
    url = status_callback_url(REPORTS_URL + "/twilio", step["attempt_id"])
    other = status_callback_url(REPORTS_URL + "/twilio", f"{step['fallback_id']}:1")
    form = twilio_form("SM" + uuid.uuid4().hex, "failed", ErrorCode="30003")
    assert post_named(client, form, url, other).status_code == 403  # the query changed
    assert post_named(client, form, REPORTS_URL + "/twilio", url).status_code == 403  # a query added to a signed one
    assert post_named(client, form, url, REPORTS_URL + "/twilio").status_code == 403  # the signed query dropped
    assert observed(db) == 0


def test_a_sendgrid_bounce_before_the_settle_fails_the_step_at_settle_once(client, db):
    step = in_flight(db, "email")
    bounce = sendgrid_event(step["intent_id"], step["attempt_id"], "bounce", status="5.1.1", type="bounce",
                            bounce_classification="Invalid Address")  # fmt: skip
    answer = post_sendgrid(client, [bounce]).get_json()
    assert (answer["stored"], answer["undeliverable"], answer["suppressed"]) == (1, 0, 1)
    assert intent(db, step["intent_id"])["status"] == "attempting"
    assert settle(db, step, f"msg-{step['intent_id']}") == {step["intent_id"]: "undeliverable"}
    row = intent(db, step["intent_id"])
    assert (row["failure_fault"], row["failure_code"], row["failure_provider"]) == ("recipient", "5.1.1", "sendgrid")
    assert intent(db, step["fallback_id"])["brought_forward_at"] is not None
    # suppressed once, when the report came; SendGrid's retry changes nothing
    assert db.one("SELECT count(*) AS n FROM destination_suppressions")["n"] == 1
    again = post_sendgrid(client, [bounce]).get_json()
    assert (again["duplicates"], again["undeliverable"]) == (1, 0)


def test_a_delivery_reported_before_the_settle_wins_over_a_later_bounce(client, db):
    step = in_flight(db, "email")
    delivered = post_sendgrid(client, [sendgrid_event(step["intent_id"], step["attempt_id"])]).get_json()
    assert delivered["delivered"] == 1
    assert settle(db, step, f"msg-{step['intent_id']}") == {step["intent_id"]: "accepted"}
    post_sendgrid(client, [sendgrid_event(step["intent_id"], step["attempt_id"], "bounce", status="5.1.1")])
    row = intent(db, step["intent_id"])
    assert (row["status"], row["delivered_at"] is not None) == ("accepted", True)
    assert intent(db, step["fallback_id"])["brought_forward_at"] is None


def bounce_of(step: dict) -> list[reports.Observation]:
    event = sendgrid_event(step["intent_id"], step["attempt_id"], "bounce", status="5.1.1", type="bounce")
    return [reports.sendgrid_observation(event)]


@pytest.mark.parametrize("first", ["report", "settle"])
def test_a_report_and_the_settle_at_once_apply_the_failure_once(db, database_url, first):
    """Each holds its transaction open while the other runs: the second waits for the intent's lock
    and then sees the first's commit, so exactly one of them fails the intent."""
    step = in_flight(db, "email")
    results: dict[str, object] = {}

    def report(on: Database) -> None:
        results["report"] = reports.ingest(on, "sendgrid", bounce_of(step), FailurePolicy())

    def settle_it(on: Database) -> None:
        results["settle"] = settle(on, step, "msg-x")

    if first == "report":
        held_while(database_url, report, lambda: settle_it(db))
    else:
        held_while(database_url, settle_it, lambda: report(db))
    assert results["settle"] == {step["intent_id"]: "undeliverable" if first == "report" else "accepted"}
    assert results["report"].undeliverable == (1 if first == "settle" else 0)  # type: ignore[attr-defined]
    row = intent(db, step["intent_id"])
    assert (row["status"], row["failure_fault"]) == ("failed", "recipient")
    assert intent(db, step["fallback_id"])["brought_forward_at"] is not None


def ambiguous(db) -> dict:
    """An SMS step whose send timed out after its request, its hold over: in_flight's, settled ambiguous."""
    step = in_flight(db, "sms")
    hold_over = Settlement(step["intent_id"], step["lease_version"], "ambiguous", delay_seconds=0,
                           error_class="timeout_after_send")  # fmt: skip
    assert t.settle(db, "worker", [hold_over]) == {step["intent_id"]: "ambiguous"}
    return step


def undelivered_of(step: dict, sid: str) -> list[reports.Observation]:
    """Twilio's `undelivered` callback about the step's attempt, linked by its signed URL's attempt."""
    url = status_callback_url(REPORTS_URL + "/twilio", step["attempt_id"])
    form = twilio_form(sid, "undelivered", ErrorCode="30003")
    return [reports.callback_attempt(reports.twilio_observation(form), urlsplit(url).query)]


RETRY_AT_ONCE = RetryPolicy(channels={"sms": ChannelPolicy("retry", 0)})


@pytest.mark.parametrize("first", ["report", "lookup", "resolve"])
def test_a_report_of_an_ambiguous_send_racing_the_reconciler_is_applied_once(db, database_url, first):
    """The report's ingest and the reconciler's lookup (which finds the message) or its resolve (policy
    retry) each hold their transaction open while the other runs. The lookup waits for the intent's
    lock and then finds it failed; the resolve skips the locked intent; the ingest waits for either
    and then fails the accepted or retryable intent. Exactly one failure, one next step brought
    forward, one settlement in the attempt log, and no claim takes the intent meanwhile."""
    step = ambiguous(db)
    sid = "SM" + uuid.uuid4().hex
    results: dict[str, object] = {}

    def report(on: Database) -> None:
        results["report"] = reports.ingest(on, "twilio", undelivered_of(step, sid), FailurePolicy())

    def reconcile(on: Database) -> None:
        if first == "resolve":
            results[first] = [r[2] for r in t.resolve_ambiguous(on, RETRY_AT_ONCE, 10)]
        else:
            results["lookup"] = t.resolve_by_lookup(on, [(step["intent_id"], step["attempt_id"], sid)])

    def report_then_try_the_others(on: Database) -> None:
        report(on)
        assert t.resolve_ambiguous(db, RETRY_AT_ONCE, 10) == []  # locked: skipped, not waited for
        assert t.claim(db, "worker", 10, 30) == []

    if first == "report":
        held_while(database_url, report_then_try_the_others, lambda: reconcile(db))
    else:
        held_while(database_url, reconcile, lambda: report(db))
    if first == "report":
        assert results["lookup"] == {}  # it found the intent failed: nothing moved, nothing applied again
    else:
        assert results[first] == ({step["intent_id"]: "accepted"} if first == "lookup" else ["retryable"])
    assert results["report"].undeliverable == 1  # type: ignore[attr-defined]
    row = intent(db, step["intent_id"])
    assert (row["status"], row["failure_code"], row["attempts"]) == ("failed", "30003", 1)
    assert intent(db, step["fallback_id"])["brought_forward_at"] is not None
    logged = db.rows("SELECT outcome, error_class FROM delivery_attempts WHERE intent_id = :i ORDER BY id",
                     i=step["intent_id"])  # fmt: skip
    assert [r["outcome"] for r in logged].count("accepted") == 1
