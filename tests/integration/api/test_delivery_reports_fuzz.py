"""Fuzzing the delivery_reports target with SIGNED input: whatever a provider (or someone holding its
key) posts, the answer is never a 5xx, rejected input stores nothing, and accepted input only ever
links to attempts that exist. Strings include what PostgreSQL cannot hold (NUL, lone UTF-16
surrogates, which JSON can spell as \ud800) and over-long values."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.reports import reports_env, sendgrid_headers, twilio_post

# text PostgreSQL refuses, as a signed JSON body can carry it (json.dumps writes \ud800 for a lone surrogate)
hostile_text = st.text(max_size=20) | st.sampled_from(
    ["\ud800", "a\udfffb", "\x00", "nul\x00x", "\udbff\udbff", "x" * 400]
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | hostile_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=10,
)
events = st.fixed_dictionaries(
    {},
    optional={
        "event": st.sampled_from(["delivered", "bounce", "dropped", "deferred", "open", "x"]) | st.text(max_size=8),
        "sg_event_id": hostile_text | st.text(max_size=40) | st.integers(),
        "sg_message_id": hostile_text | st.none(),
        "timestamp": st.integers() | st.text(max_size=5) | st.floats(allow_nan=False),
        "type": st.sampled_from(["bounce", "blocked", "expired"]) | json_values,
        "bounce_classification": st.sampled_from(["Invalid Address", "Reputation", "Unclassified"]) | json_values,
        "status": hostile_text,
        "reason": hostile_text,
        "intent_id": st.text(max_size=6) | st.integers(),
        "attempt_id": st.from_regex(r"[0-9]{1,3}:[0-9]", fullmatch=True) | st.text(max_size=8),
    },
)
bodies = st.one_of(
    st.lists(events | json_values, max_size=8).map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=60),
    json_values.map(lambda v: json.dumps(v).encode()),
)
forms = st.dictionaries(
    st.sampled_from(["MessageSid", "MessageStatus", "ErrorCode", "SmsSid", "To", "x"]) | st.text(max_size=6),
    st.text(max_size=40) | st.from_regex(r"SM[0-9a-f]{32}", fullmatch=True),
    max_size=5,
)


@pytest.fixture
def client(app_client, monkeypatch):
    for name, value in reports_env().items():
        monkeypatch.setenv(name, value)
    return app_client("delivery_reports")


def stored(db) -> int:
    return db.run(
        "SELECT (SELECT count(*) FROM delivery_observations) + (SELECT count(*) FROM destination_suppressions)"
    )[0][0]


def test_signed_sendgrid_bodies_never_5xx_and_store_nothing_unknown(client, db):
    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(bodies)
    def post(body):
        response = client.post("/sendgrid", data=body, headers=sendgrid_headers(body))
        assert response.status_code in (200, 400), response.get_data(as_text=True)
        assert "Traceback" not in response.get_data(as_text=True)
        assert stored(db) == 0  # no attempt exists: nothing can be linked, whatever the body claims

    post()


def test_signed_twilio_forms_never_5xx(client, db):
    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(forms)
    def post(form):
        body, headers = twilio_post(form)
        response = client.post("/twilio", data=body, headers=headers)
        assert response.status_code in (200, 400, 403), response.get_data(as_text=True)
        assert stored(db) == 0

    post()


def test_unsigned_garbage_is_refused(client, db):
    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.binary(max_size=80), st.sampled_from(["/sendgrid", "/twilio"]))
    def post(body, path):
        response = client.post(path, data=body, headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert response.status_code == 401 and stored(db) == 0

    post()


def test_a_batch_with_a_lone_surrogate_answers_2xx_and_stores_the_rest(client, db):
    """One event whose strings PostgreSQL cannot hold must not fail its batch (SendGrid would retry it
    forever): text is normalised (U+FFFD), an unreadable event is skipped and counted as malformed,
    and every other event of the batch is stored."""
    from support.reports import accepted, sendgrid_event

    sent = accepted(db, 3)
    odd = sendgrid_event(sent[0]["intent_id"], sent[0]["attempt_id"], "bounce", type="bounce", status="5.1.1",
                         reason="550 \ud800 user \x00 unknown", sg_event_id="evt-\ud800")  # fmt: skip
    odd["sg_message_id"] = "\udfff" * 300
    fine = sendgrid_event(sent[1]["intent_id"], sent[1]["attempt_id"])
    also = sendgrid_event(sent[2]["intent_id"], sent[2]["attempt_id"], "deferred", response="\ud800")
    body = json.dumps([odd, "\ud800", fine, also, ["not", "an", "event"]]).encode()
    assert b"\\ud800" in body  # the reproduction: JSON's escape of a lone surrogate, signed
    response = client.post("/sendgrid", data=body, headers=sendgrid_headers(body))
    assert response.status_code == 200, response.get_data(as_text=True)
    answer = response.get_json()
    assert (answer["stored"], answer["malformed"], answer["undeliverable"], answer["delivered"]) == (3, 2, 1, 1)
    keys = [r[0] for r in db.run("SELECT dedup_key FROM delivery_observations ORDER BY id")]
    assert len(keys) == 3 and all("\ud800" not in k and "\x00" not in k for k in keys)
