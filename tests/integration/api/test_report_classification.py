"""Every row of every provider's table, asynchronously: a signed report through the real
delivery_reports target about a delivery the provider accepted, and what it sets off: a final
one fails the delivery with the row's reason (and brings nothing back); only a recipient's fault
suppresses the destination; an account fault counts towards holding the channel, a route fault
towards holding the delivery's route only (its country, its receiving domain), and neither
suppresses anybody; a message fault holds nothing."""

from __future__ import annotations

import pytest

from signup_verification.delivery.classification import Fault, Rule, Scope
from signup_verification.delivery.classification import sendgrid as sendgrid_table
from signup_verification.delivery.classification import twilio as twilio_table
from support.reports import accepted, post_sendgrid, reports_env, sendgrid_event, twilio_form, twilio_post


@pytest.fixture
def client(app_client, monkeypatch):
    for name, value in reports_env().items():
        monkeypatch.setenv(name, value)
    return app_client("delivery_reports")


def effects(db, intent_id: int) -> dict:
    row = db.one("SELECT status, failure_category, failure_code, failure_fault FROM delivery_intents WHERE id = :i",
                 i=intent_id)  # fmt: skip
    holds = {(r["scope"], r["route"]): r["faults"] for r in db.rows("SELECT scope, route, faults FROM channel_holds")}
    return {
        **row,
        "suppressed": db.one("SELECT count(*) AS n FROM destination_suppressions")["n"],
        "holds": holds,
    }


def expect(found: dict, rule: Rule, code: str | None) -> None:
    if rule.final:
        assert (found["status"], found["failure_category"], found["failure_fault"]) == (
            "failed", rule.category, rule.fault)  # fmt: skip
        assert found["failure_code"] == code
    else:
        assert found["status"] == "accepted" and found["failure_category"] is None
    assert found["suppressed"] == (1 if rule.fault is Fault.RECIPIENT else 0)
    if rule.scope is Scope.ACCOUNT:
        assert found["holds"] == {("account", ""): 1}
    elif rule.scope is Scope.ROUTE:  # the delivery's route only: +1415... is US, user0.rep@example.com example.com
        assert found["holds"] in ({("route", "US"): 1}, {("route", "example.com"): 1})
    else:
        assert found["holds"] == {}


@pytest.mark.parametrize("code", sorted(twilio_table.ERRORS))
def test_every_twilio_error_code_in_a_status_callback(client, db, code):
    [sent] = accepted(db, channel="sms")
    status = "failed" if code < 30000 else "undelivered"
    body, headers = twilio_post(twilio_form(sent["ref"], status, ErrorCode=str(code)))
    answer = client.post("/twilio", data=body, headers=headers)
    rule = twilio_table.ERRORS[code]
    assert answer.status_code == 200 and answer.get_json()["undeliverable"] == (1 if rule.final else 0)
    expect(effects(db, sent["intent_id"]), rule, str(code))


def _sendgrid_cases() -> list[tuple[str, dict, Rule, str | None]]:
    types = sendgrid_table.BOUNCE_TYPES
    cases = [
        ("bounce", {"type": "bounce", "status": "5.0.0"}, types["bounce"], "5.0.0"),
        ("bounce", {"type": "blocked", "status": "5.0.0"}, types["blocked"], "5.0.0"),
        ("bounce", {"type": "expired"}, types["expired"], "expired"),
        ("spamreport", {}, sendgrid_table.EVENTS["spamreport"], None),
        ("unsubscribe", {}, sendgrid_table.EVENTS["unsubscribe"], None),
        ("group_unsubscribe", {"asm_group_id": 7}, sendgrid_table.EVENTS["group_unsubscribe"], None),
        ("dropped", {"reason": "Something new"}, sendgrid_table.DROPPED_OTHER, "other"),
    ]
    # the classification wins over the type: a `bounce` for Reputation is not the address's fault
    cases += [
        ("bounce", {"type": "bounce", "status": "5.0.0", "bounce_classification": name}, rule, "5.0.0")
        for name, rule in sendgrid_table.BOUNCE_CLASSIFICATIONS.items()
    ]
    cases += [
        ("dropped", {"reason": reason}, rule, code) for reason, (code, rule) in sendgrid_table.DROP_REASONS.items()
    ]
    return cases


def _case_id(case) -> str:
    fields = case[1]
    return "-".join(str(p) for p in (case[0], fields.get("type"), fields.get("bounce_classification"),
                                     fields.get("reason")) if p)  # fmt: skip


@pytest.mark.parametrize(("event", "fields", "rule", "code"), _sendgrid_cases(),
                         ids=[_case_id(c) for c in _sendgrid_cases()])  # fmt: skip
def test_every_sendgrid_event_and_drop_reason(client, db, event, fields, rule, code):
    [sent] = accepted(db)
    answer = post_sendgrid(client, [sendgrid_event(sent["intent_id"], sent["attempt_id"], event, **fields)])
    assert answer.status_code == 200 and answer.get_json()["stored"] == 1
    expect(effects(db, sent["intent_id"]), rule, code)


def test_a_bounce_whose_status_says_mailbox_full_blames_nobody(client, db):
    [sent] = accepted(db)
    post_sendgrid(client, [sendgrid_event(sent["intent_id"], sent["attempt_id"], "bounce", type="bounce",
                                          status="5.2.2")])  # fmt: skip
    found = effects(db, sent["intent_id"])
    assert (found["status"], found["failure_category"], found["failure_fault"], found["suppressed"]) == (
        "failed", "mailbox_full", "transient_or_unknown", 0)  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "category", "fault"),
    [
        ({"type": "bounce", "status": "5.7.1"}, "blocked", "sender_or_account"),  # a policy refusal: a route's
        ({"type": "bounce", "status": "5.2.1"}, "unreachable", "transient_or_unknown"),  # disabled: never suppressed
        ({"type": "bounce", "status": "5.1.1", "bounce_classification": "Unclassified"}, "bounced", "recipient"),
        ({"type": "blocked", "status": "5.1.1", "bounce_classification": "Invalid Address"}, "bounced", "recipient"),
    ],
)
def test_a_bounce_is_read_by_its_type_its_classification_and_its_status(client, db, fields, category, fault):
    [sent] = accepted(db)
    post_sendgrid(client, [sendgrid_event(sent["intent_id"], sent["attempt_id"], "bounce", **fields)])
    found = effects(db, sent["intent_id"])
    assert (found["failure_category"], found["failure_fault"]) == (category, fault)
    assert found["suppressed"] == (1 if fault == "recipient" else 0)
    assert ("account", "") not in found["holds"]  # a remote server's report never holds the channel


def test_every_table_row_is_a_case_here():
    covered = {id(case[2]) for case in _sendgrid_cases()}
    rows = [*sendgrid_table.EVENTS.values(), *(rule for _, rule in sendgrid_table.DROP_REASONS.values()),
            *sendgrid_table.BOUNCE_TYPES.values(), *sendgrid_table.BOUNCE_CLASSIFICATIONS.values(),
            sendgrid_table.DROPPED_OTHER]  # fmt: skip
    assert all(id(rule) in covered for rule in rows)
