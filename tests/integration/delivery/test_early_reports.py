"""Provider reports that come before the worker settles their attempt, through the real worker, the
delivery_reports target and a real PostgreSQL: Twilio posts a message's or a call's callbacks while
our create request still waits for its answer (the fake posts them before it answers), so they are
stored before the settle. Each callback names its attempt in its signed URL and links to it; the
settle that accepts the attempt applies a final one (the step fails for good, the next comes
forward), a delivery reported first is counted, and a machine's answer ends the call at once."""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import pytest

from signup_verification.operations import timeline
from signup_verification.operations.reconciler.runner import reconcile
from support.dispatch import provider_settings, run_dispatch
from support.factories import created
from support.fakes.twilio import FakeTwilio
from support.fakes.twilio_callbacks import post_callbacks
from support.reports import REPORTS_URL, reports_env

MOBILE = "+14155550100"


@pytest.fixture
def reports(configured_app, twilio):
    env = reports_env(TWILIO_AUTH_TOKEN=twilio.auth_token, TWILIO_ACCOUNT_SID=twilio.account_sid,
                      TWILIO_API_URL=twilio.url)  # fmt: skip
    return configured_app("delivery_reports", **env)


@pytest.fixture
def settings(smtp, twilio):
    return provider_settings(smtp, twilio, delivery_reports_url=REPORTS_URL)


def reported_first(twilio: FakeTwilio, reports, outcome: str, posted: list | None = None) -> list[dict]:
    """Twilio's callbacks for `outcome`, each posted (signed for the StatusCallback URL the request
    carried) before Twilio answers the request: what the target answered each (and in `posted`, each
    request's query, body and headers)."""
    answers: list[dict] = []
    posted = [] if posted is None else posted

    def before_answer(sid: str, to: str, form: dict) -> None:
        url = form["StatusCallback"]

        def send(body: bytes, headers: dict[str, str]) -> int:
            posted.append((urlsplit(url).query, body, headers))
            answer = reports.post("/twilio?" + urlsplit(url).query, data=body, headers=headers)
            answers.append(answer.get_json())
            return answer.status_code

        assert set(post_callbacks(twilio, url, sid, to, send, outcome)) == {200}

    twilio.before_answer = before_answer
    return answers


def reported_then_stalled(twilio: FakeTwilio, reports, outcome: str) -> tuple[list[str], list[dict]]:
    """As reported_first, then Twilio's own answer stalls past the worker's 0.5 s timeout, so our
    request's outcome is ambiguous: the sids Twilio created, and what the target answered each report."""
    answers = reported_first(twilio, reports, outcome)
    posting = twilio.before_answer
    assert posting is not None
    created: list[str] = []

    def report_then_stall(sid: str, to: str, form: dict) -> None:
        created.append(sid)
        posting(sid, to, form)
        time.sleep(1.0)  # past the worker's 0.5 s timeout: it never reads the 201

    twilio.before_answer = report_then_stall
    return created, answers


def steps(db, vid) -> tuple[dict, dict]:
    first, second = db.rows(
        "SELECT * FROM delivery_intents WHERE verification_id = :v AND role <> 'event' ORDER BY id", v=vid
    )
    return first, second


def phone_then_email(db, settings, channel: str) -> object:
    fallback = {"channel": "email", "destination": "ada@example.com", "after_seconds": 300}
    return created(db, MOBILE, channel=channel, fallback=fallback, config=settings.create)


@pytest.mark.parametrize(
    ("channel", "outcome", "code", "category"),
    [
        ("sms", "undelivered:30003", "30003", "unreachable"),
        ("whatsapp", "failed:63024", "63024", "invalid_destination"),
        ("voice", "busy", "busy", "unreachable"),
    ],  # fmt: skip
)
def test_a_final_report_before_the_settle_fails_the_step_at_settle_and_brings_the_next_forward(
    db, reports, settings, twilio, smtp, channel, outcome, code, category
):
    vid = phone_then_email(db, settings, channel)
    posted: list[tuple[str, bytes, dict]] = []
    answers = reported_first(twilio, reports, outcome, posted)
    # Twilio took it; its report, applied at settle, failed it: undeliverable, not a failed send
    report = run_dispatch(db, settings)
    assert (report.accepted, report.failed, report.undeliverable) == (0, 0, 1)
    assert report.summary().endswith(": 1 undeliverable")
    # each callback linked by its URL's attempt while the send was in flight: none unknown, the final
    # one stored, its effect left to the settle
    assert answers and all(a["unknown"] == 0 and a["undeliverable"] == 0 for a in answers)
    assert sum(a["stored"] for a in answers) == len(answers)
    step, email = steps(db, vid)
    [final] = db.rows("SELECT * FROM delivery_observations WHERE intent_id = :i AND permanent", i=step["id"])
    assert final["attempt_id"] == f"{step['id']}:1"
    assert step["status"] == "failed" and step["undeliverable_reason"] is not None
    assert (step["failure_category"], step["failure_fault"]) == (final["category"], final["fault"])
    assert (step["failure_category"], step["failure_code"], step["failure_provider"]) == (category, code, "twilio")
    assert step["delivered_at"] is None and step["provider_ref"] == final["provider_ref"]
    assert email["brought_forward_at"] is not None  # at settle, not after its 300 s
    twilio.before_answer = None
    assert run_dispatch(db, settings).accepted == 1 and len(smtp.received) == 1  # the next step goes out now
    # Twilio's retry of the final callback, after the settle: a duplicate, nothing applied twice
    query, body, headers = posted[-1]
    again = reports.post("/twilio?" + query, data=body, headers=headers).get_json()
    assert (again["stored"], again["duplicates"], again["undeliverable"]) == (0, 1, 0)
    outcomes = db.rows("SELECT outcome FROM delivery_attempts WHERE intent_id = :i ORDER BY id", i=step["id"])
    assert [o["outcome"] for o in outcomes] == ["attempting", "accepted"]


def test_a_delivery_reported_before_the_settle_counts(db, reports, settings, twilio):
    vid = phone_then_email(db, settings, "sms")
    answers = reported_first(twilio, reports, "delivered")
    assert run_dispatch(db, settings).accepted == 1
    assert [a["delivered"] for a in answers] == [0, 0, 1] and all(a["unknown"] == 0 for a in answers)
    step, email = steps(db, vid)
    assert (step["status"], step["delivered_at"] is not None) == ("accepted", True)
    assert email["brought_forward_at"] is None


def test_a_machine_answer_before_the_settle_ends_the_call_and_fails_the_step(db, reports, settings, twilio):
    vid = phone_then_email(db, settings, "voice")
    answers = reported_first(twilio, reports, "machine")
    report = run_dispatch(db, settings)
    assert (report.failed, report.undeliverable) == (0, 1)
    [sid] = list(twilio.calls)
    ended = [e for e in twilio.exchanges if e.path.endswith(f"/Calls/{sid}.json") and e.status == 200]
    assert len(ended) == 1  # hung up while the greeting played, before the send was even settled
    assert all(a["unknown"] == 0 for a in answers)
    step, email = steps(db, vid)
    assert (step["status"], step["failure_category"], step["delivered_at"]) == ("failed", "unreachable", None)
    assert email["brought_forward_at"] is not None


def test_a_callback_without_the_attempt_in_its_url_still_links_by_sid_once_settled(db, reports, settings, twilio):
    """A message sent before its StatusCallback named the attempt: its callbacks carry no query."""
    vid = phone_then_email(db, settings, "sms")
    assert run_dispatch(db, settings).accepted == 1
    step, _ = steps(db, vid)

    def send(body: bytes, headers: dict[str, str]) -> int:
        return reports.post("/twilio", data=body, headers=headers).status_code

    assert post_callbacks(twilio, REPORTS_URL + "/twilio", step["provider_ref"], MOBILE, send,
                          "undelivered:30003") == [200, 200, 200]  # fmt: skip
    step, email = steps(db, vid)
    assert (step["status"], step["failure_code"], email["brought_forward_at"] is not None) == ("failed", "30003", True)


@pytest.mark.parametrize(
    ("channel", "outcome"), [("sms", "undelivered:30003"), ("whatsapp", "undelivered:63024"), ("voice", "busy")]
)
def test_a_final_report_before_an_answer_that_never_came_counts_undeliverable_and_names_the_message_or_call(
    db, reports, smtp, twilio, channel, outcome
):
    """Twilio creates the message or call and posts its final status, then its answer to our request is
    lost (it comes after our timeout): the send's own outcome is ambiguous, the stored report settles it.
    The report's MessageSid or CallSid is the only reference we have of it: the attempt log's settlement
    and the step carry it, so an operator can look the message or call up at Twilio."""
    settings = provider_settings(smtp, twilio, delivery_reports_url=REPORTS_URL, send_timeout_seconds=0.5)
    vid = phone_then_email(db, settings, channel)
    created, answers = reported_then_stalled(twilio, reports, outcome)
    report = run_dispatch(db, settings)
    assert (report.ambiguous, report.failed, report.undeliverable) == (0, 0, 1)
    assert report.summary().endswith(": 1 undeliverable")
    assert answers and all(a["unknown"] == 0 for a in answers)
    step, email = steps(db, vid)
    assert (step["status"], step["undeliverable_reason"] is not None) == ("failed", True)
    assert email["brought_forward_at"] is not None
    [sid] = created
    logged = db.rows("SELECT outcome, error_class, provider_ref FROM delivery_attempts WHERE intent_id = :i"
                     " ORDER BY id", i=step["id"])  # fmt: skip
    assert [(r["outcome"], r["error_class"], r["provider_ref"]) for r in logged] == [
        ("attempting", None, None),
        ("ambiguous", "timeout_after_send", None),
        ("accepted", "provider_report", sid),
    ]
    assert step["provider_ref"] == sid
    # what `verifyctl inspect` says of the attempt
    assert any(e.detail == f"attempt 1 (id {step['id']}:1) accepted; provider_report; provider ref {sid}"
               for e in timeline.timeline(db, vid).events)  # fmt: skip


@pytest.mark.parametrize(("channel", "outcome"), [("sms", "delivered"), ("whatsapp", "delivered"), ("voice", "human")])
def test_a_delivery_reported_before_an_answer_that_never_came_accepts_the_step_and_sends_nothing_again(
    db, reports, smtp, twilio, channel, outcome
):
    """Twilio delivers the message (a person answers the call) and says so, then its answer to our
    request is lost: the send's own outcome is ambiguous, and the stored report settles it as sent.
    The step is accepted and delivered, its settlement names the message or call, and the ambiguity
    policy (retry at once) has nothing to send again."""
    settings = provider_settings(smtp, twilio, delivery_reports_url=REPORTS_URL, send_timeout_seconds=0.5,
                                 **{f"ambiguous_policy_{channel}": "retry", f"ambiguous_hold_seconds_{channel}": 0})  # fmt: skip
    vid = phone_then_email(db, settings, channel)
    created, _ = reported_then_stalled(twilio, reports, outcome)
    report = run_dispatch(db, settings)
    assert (report.accepted, report.ambiguous) == (1, 0)
    [sid] = created
    step, email = steps(db, vid)
    assert (step["status"], step["delivered_at"] is not None, step["provider_ref"]) == ("accepted", True, sid)
    logged = db.rows("SELECT outcome, error_class, provider_ref FROM delivery_attempts WHERE intent_id = :i"
                     " ORDER BY id", i=step["id"])  # fmt: skip
    assert [(r["outcome"], r["error_class"], r["provider_ref"]) for r in logged] == [
        ("attempting", None, None),
        ("ambiguous", "timeout_after_send", None),
        ("accepted", "provider_report", sid),
    ]
    twilio.before_answer = None
    reconcile(db, settings.reconciler, emit_signals=False)
    assert run_dispatch(db, settings).claimed == 0
    assert len(twilio.deliveries) == 1 and email["brought_forward_at"] is None
