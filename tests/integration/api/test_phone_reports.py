"""WhatsApp status callbacks and voice call callbacks through the delivery_reports target on a real
PostgreSQL: verified with Twilio's signature as an SMS's are, classified by their channel's table,
stored once as observations; a final failure of a step fails it for good and brings the next step
forward; a machine's answer ends the call (against a Twilio-speaking local server)."""

from __future__ import annotations

import time

import pytest

from support.fakes.http import Answer
from support.fakes.twilio import FakeTwilio
from support.fakes.twilio_callbacks import post_callbacks
from support.reports import REPORTS_URL, call_form, phone_step, reports_env, twilio_form, twilio_post


@pytest.fixture
def twilio():
    with FakeTwilio(auth_token="twilio-report-token") as fake:  # nosec B106: the test's token
        yield fake


@pytest.fixture
def client(app_client, monkeypatch, twilio):
    env = reports_env(TWILIO_ACCOUNT_SID=twilio.account_sid, TWILIO_API_URL=twilio.url)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return app_client("delivery_reports")


def post(client, form: dict[str, str], **signing):
    body, headers = twilio_post(form, **signing)
    return client.post("/twilio", data=body, headers=headers)


def intent(db, intent_id: int) -> dict:
    return db.one("SELECT * FROM delivery_intents WHERE id = :id", id=intent_id)


def brought_forward(db, step: dict) -> bool:
    return intent(db, step["fallback_id"])["brought_forward_at"] is not None


def observed(db) -> list[tuple]:
    return [tuple(r) for r in db.run("SELECT event, detail, permanent FROM delivery_observations ORDER BY id")]


def suppressions(db) -> list[tuple]:
    return [tuple(r) for r in db.run("SELECT channel, category FROM destination_suppressions ORDER BY channel")]


def ended_calls(twilio: FakeTwilio) -> list[str]:
    """The calls the report path ended (Twilio answered 200: the call was in progress)."""
    return [e.path.rsplit("/", 1)[-1].removesuffix(".json") for e in twilio.exchanges
            if "/Calls/" in e.path and e.status == 200]  # fmt: skip


def answering(twilio: FakeTwilio, step: dict, answered_by: str = "machine_start") -> None:
    """The call is in progress: answered (Twilio placed it; detection runs in the background)."""
    twilio.placed(step["ref"]).update(status="in-progress", answered_by=answered_by)


def sent_by_twilio(client, twilio: FakeTwilio, step: dict, outcome: str, to: str = "+14155550100") -> list[int]:
    """Every callback Twilio posts about the step's message or call, for `outcome`, through the target."""

    def send(body: bytes, headers: dict[str, str]) -> int:
        return client.post("/twilio", data=body, headers=headers).status_code

    return post_callbacks(twilio, REPORTS_URL + "/twilio", step["ref"], to, send, outcome)


# -- WhatsApp ------------------------------------------------------------------------------------------
def test_whatsapp_read_is_delivered_once_whatever_the_order(client, db):
    step = phone_step(db, "whatsapp")
    for status in ("sent", "read", "delivered", "queued", "read"):
        form = twilio_form(step["ref"], status, To="whatsapp:+14155550100", ChannelPrefix="whatsapp")
        assert post(client, form).status_code == 200
    assert [e for e, *_ in observed(db)] == ["sent", "read", "delivered", "queued"]  # the replayed read: once
    row = intent(db, step["intent_id"])
    assert (row["status"], row["delivered_at"] is not None) == ("accepted", True)
    assert not brought_forward(db, step)


def test_a_whatsapp_read_alone_says_it_was_delivered(client, db):
    """Its `delivered` callback lost (or still to come): `read` says it arrived."""
    step = phone_step(db, "whatsapp")
    assert post(client, twilio_form(step["ref"], "read", ChannelPrefix="whatsapp")).get_json()["delivered"] == 1
    assert intent(db, step["intent_id"])["delivered_at"] is not None


def test_whatsapp_without_whatsapp_fails_the_step_brings_the_fallback_forward_and_suppresses_whatsapp_only(client, db):
    step = phone_step(db, "whatsapp")
    form = twilio_form(step["ref"], "undelivered", ErrorCode="63003", To="whatsapp:+14155550100",
                       ChannelPrefix="whatsapp")  # fmt: skip
    answer = post(client, form).get_json()
    assert (answer["stored"], answer["undeliverable"], answer["suppressed"]) == (1, 1, 1)
    row = intent(db, step["intent_id"])
    assert (row["status"], row["failure_category"], row["failure_code"], row["failure_fault"]) == (
        "failed", "invalid_destination", "63003", "recipient")  # fmt: skip
    assert brought_forward(db, step)
    assert suppressions(db) == [("whatsapp", "invalid_destination")]  # the number may still take an SMS
    again = post(client, form).get_json()  # Twilio's retry: nothing twice
    assert (again["stored"], again["duplicates"], again["undeliverable"]) == (0, 1, 0)


def test_a_whatsapp_sender_fault_holds_whatsapp_not_sms(client, db):
    step = phone_step(db, "whatsapp")
    form = twilio_form(step["ref"], "failed", ErrorCode="63007", ChannelPrefix="whatsapp")
    answer = post(client, form).get_json()
    assert (answer["sender_faults"], answer["suppressed"]) == (1, 0)
    assert db.run("SELECT channel FROM channel_holds")[0][0] == "whatsapp"
    assert brought_forward(db, step)


def test_a_whatsapp_callback_is_refused_unsigned_or_forged(client, db):
    step = phone_step(db, "whatsapp")
    form = twilio_form(step["ref"], "undelivered", ErrorCode="63003", ChannelPrefix="whatsapp")
    body, headers = twilio_post(form)
    assert client.post("/twilio", data=body, headers={"Content-Type": headers["Content-Type"]}).status_code == 401
    assert post(client, form, token="wrong-token").status_code == 403
    assert observed(db) == [] and not brought_forward(db, step)


# -- voice ---------------------------------------------------------------------------------------------
def test_a_call_answered_by_a_person_is_delivered(client, db, twilio):
    step = phone_step(db, "voice")
    for form in (call_form(step["ref"], answered_by="human"), call_form(step["ref"], "completed")):
        assert post(client, form).status_code == 200
    assert observed(db) == [("answered", "human", False), ("delivered", "completed", False)]
    row = intent(db, step["intent_id"])
    assert (row["status"], row["delivered_at"] is not None) == ("accepted", True)
    assert not brought_forward(db, step) and ended_calls(twilio) == []


@pytest.mark.parametrize(
    "status, event, category",
    [("busy", "busy", "unreachable"), ("no-answer", "no_answer", "unreachable"), ("failed", "failed", "unknown"),
     ("canceled", "canceled", "unknown")],
)  # fmt: skip
def test_a_call_not_answered_is_final_for_its_step_and_brings_the_next_forward(client, db, status, event, category):
    step = phone_step(db, "voice")
    answer = post(client, call_form(step["ref"], status)).get_json()
    assert (answer["undeliverable"], answer["suppressed"], answer["sender_faults"]) == (1, 0, 0)
    assert observed(db) == [(event, None, True)]
    row = intent(db, step["intent_id"])
    assert (row["status"], row["failure_category"], row["failure_code"], row["failure_fault"]) == (
        "failed", category, status, "transient_or_unknown")  # fmt: skip
    assert brought_forward(db, step)
    assert suppressions(db) == []  # a call nobody answered never blames the number


def test_a_failed_call_naming_an_invalid_number_suppresses_it_for_calls(client, db):
    step = phone_step(db, "voice")
    answer = post(client, call_form(step["ref"], "failed", ErrorCode="21217")).get_json()
    assert (answer["undeliverable"], answer["suppressed"]) == (1, 1)
    assert suppressions(db) == [("voice", "invalid_destination")]


@pytest.mark.parametrize(
    "answered_by", ["machine_start", "machine_end_beep", "machine_end_silence", "machine_end_other", "fax"]
)
def test_a_machine_answer_fails_the_step_ends_the_call_once_and_brings_the_next_forward(
    client, db, twilio, answered_by
):
    step = phone_step(db, "voice")
    answering(twilio, step, answered_by)
    amd = call_form(step["ref"], answered_by=answered_by)
    answer = post(client, amd).get_json()
    assert (answer["stored"], answer["undeliverable"], answer["suppressed"]) == (1, 1, 0)
    assert ended_calls(twilio) == [step["ref"]] and twilio.calls[step["ref"]]["status"] == "completed"
    [ended] = [e for e in twilio.exchanges if "/Calls/" in e.path]
    assert ended.body == b"Status=completed" and ended.headers["Authorization"].startswith("Basic ")
    row = intent(db, step["intent_id"])
    assert (row["status"], row["failure_category"], row["failure_code"]) == ("failed", "unreachable", answered_by)
    assert brought_forward(db, step)
    # the call's own end, then a replay of the detection: nothing changes, the call is not ended again
    assert post(client, call_form(step["ref"], "completed")).get_json()["delivered"] == 0
    assert post(client, amd).get_json()["duplicates"] == 1
    assert len(ended_calls(twilio)) == 1
    assert intent(db, step["intent_id"])["delivered_at"] is None


def test_a_completed_call_carrying_a_machine_answer_is_not_delivered(client, db, twilio):
    step = phone_step(db, "voice")
    answer = post(client, call_form(step["ref"], "completed", answered_by="machine_end_beep")).get_json()
    assert answer["undeliverable"] == 1 and ended_calls(twilio) == []  # over already: nothing to end
    assert observed(db) == [("completed", "machine_end_beep", True)]


def test_pending_statuses_and_undecided_detection_change_nothing(client, db, twilio):
    step = phone_step(db, "voice")
    for form in (call_form(step["ref"], "initiated"), call_form(step["ref"], "ringing"),
                 call_form(step["ref"], "in-progress"), call_form(step["ref"], answered_by="unknown")):  # fmt: skip
        assert post(client, form).get_json()["undeliverable"] == 0
    row = intent(db, step["intent_id"])
    assert (row["status"], row["delivered_at"]) == ("accepted", None)
    assert not brought_forward(db, step) and ended_calls(twilio) == []


def test_a_hang_up_that_fails_keeps_the_report(client, db, twilio, caplog):
    """Twilio answers the hang-up with a 500 (or not at all in time): the report is stored and its
    effects are kept; the call runs to its time limit."""
    step = phone_step(db, "voice")
    answering(twilio, step)
    twilio.script(Answer(500, {"code": 20500, "message": "Internal Server Error", "status": 500}))
    response = post(client, call_form(step["ref"], answered_by="machine_start"))
    assert response.status_code == 200 and response.get_json()["undeliverable"] == 1
    assert intent(db, step["intent_id"])["status"] == "failed" and brought_forward(db, step)
    assert twilio.calls[step["ref"]]["status"] == "in-progress" and ended_calls(twilio) == []
    [warned] = [r for r in caplog.records if getattr(r, "json_fields", {}).get("event") == "call_ended"]
    assert warned.levelname == "WARNING" and warned.json_fields["over"] is False
    assert warned.json_fields["detail"].startswith("twilio 500 code 20500")


def test_a_hang_up_twilio_does_not_answer_in_time_is_bounded_and_keeps_the_report(client, db, twilio, monkeypatch):
    from signup_verification.delivery import call_control

    monkeypatch.setattr(call_control, "TIMEOUT_SECONDS", 0.3)
    step = phone_step(db, "voice")
    answering(twilio, step)
    twilio.script(Answer(delay=3))
    started = time.monotonic()
    response = post(client, call_form(step["ref"], answered_by="machine_end_beep"))
    assert time.monotonic() - started < 2.5  # it did not wait for Twilio's answer
    assert response.status_code == 200 and intent(db, step["intent_id"])["status"] == "failed"


def test_a_call_over_before_its_hang_up_is_left_alone(client, db, twilio):
    """Detection's result came after the call ended: Twilio refuses to end it (21220), nothing else."""
    step = phone_step(db, "voice")
    twilio.placed(step["ref"])["status"] = "completed"
    assert post(client, call_form(step["ref"], answered_by="machine_start")).get_json()["undeliverable"] == 1
    [refused] = [e for e in twilio.exchanges if "/Calls/" in e.path]
    assert refused.status == 400 and b"21220" in refused.response_body


@pytest.mark.parametrize(
    "outcome, delivered, failure",
    [("human", True, None), ("machine", False, "unreachable"), ("busy", False, "unreachable"),
     ("no-answer", False, "unreachable"), ("failed", False, "unknown")],
)  # fmt: skip
def test_every_call_outcome_as_twilio_posts_it(client, db, twilio, outcome, delivered, failure):
    step = phone_step(db, "voice")
    twilio.placed(step["ref"])
    assert set(sent_by_twilio(client, twilio, step, outcome)) == {200}
    row = intent(db, step["intent_id"])
    assert (row["delivered_at"] is not None, row["failure_category"]) == (delivered, failure)
    assert brought_forward(db, step) is not delivered
    assert ended_calls(twilio) == ([step["ref"]] if outcome == "machine" else [])
    assert suppressions(db) == []
    # Twilio posts it all again (its retries, a replay): nothing changes, no call is ended twice
    before = db.run("SELECT count(*) FROM delivery_observations")[0][0]
    assert set(sent_by_twilio(client, twilio, step, outcome)) == {200}
    assert db.run("SELECT count(*) FROM delivery_observations")[0][0] == before
    assert len(ended_calls(twilio)) == (1 if outcome == "machine" else 0)


@pytest.mark.parametrize(
    "outcome, delivered, failure", [("delivered", True, None), ("undelivered:63003", False, "invalid_destination"),
                                    ("failed:63016", False, "message_rejected")]
)  # fmt: skip
def test_every_whatsapp_outcome_as_twilio_posts_it(client, db, twilio, outcome, delivered, failure):
    step = phone_step(db, "whatsapp")
    assert set(sent_by_twilio(client, twilio, step, outcome, to="whatsapp:+14155550100")) == {200}
    row = intent(db, step["intent_id"])
    assert (row["delivered_at"] is not None, row["failure_category"]) == (delivered, failure)
    assert brought_forward(db, step) is not delivered


def test_a_machine_answer_on_a_call_we_do_not_know_ends_nothing(client, db, twilio):
    answer = post(client, call_form("CA" + "7" * 32, answered_by="machine_start")).get_json()
    assert answer["unknown"] == 1 and ended_calls(twilio) == []


def test_call_callbacks_are_refused_unsigned_or_forged_and_end_nothing(client, db, twilio):
    step = phone_step(db, "voice")
    amd = call_form(step["ref"], answered_by="machine_start")
    body, headers = twilio_post(amd)
    assert client.post("/twilio", data=body, headers={"Content-Type": headers["Content-Type"]}).status_code == 401
    assert post(client, amd, url="https://evil.example/delivery_reports/twilio").status_code == 403
    assert observed(db) == [] and ended_calls(twilio) == [] and not brought_forward(db, step)


@pytest.mark.parametrize(
    "form",
    [
        {"CallSid": "CA123", "CallStatus": "completed"},  # not a call sid
        {"CallSid": "CA" + "1" * 32, "CallStatus": "exploded"},
        {"CallSid": "CA" + "1" * 32, "AnsweredBy": "robot"},
        {"CallSid": "CA" + "1" * 32},  # neither a status nor a detection result
        {"CallSid": "CA" + "1" * 32, "CallStatus": "completed", "CallDuration": "x" * 5000},
    ],
)
def test_malformed_call_callbacks_are_a_problem_never_a_5xx(client, db, form, caplog):
    response = post(client, form)
    assert response.status_code in (200, 400), response.get_data(as_text=True)
    if response.status_code == 400:
        assert response.mimetype == "application/problem+json"
        [counted] = [r for r in caplog.records if getattr(r, "json_fields", {}).get("malformed") == 1]
        assert counted.levelname == "WARNING"
    assert db.run("SELECT count(*) FROM delivery_observations")[0][0] == 0
