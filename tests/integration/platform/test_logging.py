"""Structured logging: Cloud Logging's JSON lines (severity, labels, trace), a readable local format,
and the redaction safety net, down to a full scenario whose every log line is checked for secrets."""

from __future__ import annotations

import io
import logging
import socket
import uuid

import flask
import pytest

from signup_verification import runtime
from signup_verification.config import load
from signup_verification.platform import logs as service_logging
from signup_verification.platform.redaction import redact_text
from signup_verification.verifications.tokens import Keyring
from support.logs import LogLines
from support.paths import ROOT, TEST_TOKEN_KEYS

TRACE_ID = "105445aa7843bc8bf206b12000100000"
_log = logging.getLogger("signup_verification.test")


# -- format ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "env, expected",
    [
        ({}, "text"),  # a laptop
        ({"K_SERVICE": "reconcile"}, "json"),  # Cloud Run / Cloud Functions gen2
        ({"K_SERVICE": "reconcile", "LOG_FORMAT": "text"}, "text"),
        ({"LOG_FORMAT": "JSON"}, "json"),
    ],
)
def test_format_is_json_on_cloud_run_and_text_locally(env, expected):
    assert load(env).logging.format == expected


def test_text_format_is_one_readable_line():
    stream = io.StringIO()
    service_logging.configure(fmt="text", deployment="test", stream=stream)
    try:
        _log.info("reconcile: %d moved", 3, extra={"json_fields": {"event": "reconcile", "claims_expired": 3}})
    finally:
        service_logging.remove()
    [line] = stream.getvalue().splitlines()
    assert line.endswith("INFO    signup_verification.test: reconcile: 3 moved  event=reconcile claims_expired=3")


def test_configure_replaces_its_own_handler_and_keeps_others():
    other = logging.NullHandler()
    logging.getLogger().addHandler(other)
    try:
        for _ in range(3):
            service_logging.configure(fmt="json", stream=io.StringIO())
        ours = [h for h in logging.getLogger().handlers if getattr(h, "_signup_verification_handler", False)]
        assert len(ours) == 1 and other in logging.getLogger().handlers
    finally:
        service_logging.remove()
        logging.getLogger().removeHandler(other)


# -- JSON records ------------------------------------------------------------------------------------
def _record(log_lines: LogLines, **headers) -> dict:
    service_logging.configure(load({"GOOGLE_CLOUD_PROJECT": "proj-1"}).logging, fmt="json", deployment="test")
    app = flask.Flask("t")
    with app.test_request_context("/confirm?token=abc", headers=headers):
        _log.warning(
            "signals email: %d ready",
            4,
            extra={"labels": {"channel": "email"}, "json_fields": {"event": "signals", "ready_count": 4, "age": 1.5}},
        )
    [record] = log_lines.records()
    return record


def test_json_record_has_severity_labels_numbers_and_the_cloud_trace(log_lines):
    record = _record(log_lines, **{"X-Cloud-Trace-Context": f"{TRACE_ID}/1;o=1"})
    assert record["severity"] == "WARNING"
    assert record["message"] == "signals email: 4 ready"
    assert record["logging.googleapis.com/labels"] == {
        "python_logger": "signup_verification.test",
        "deployment": "test",
        "channel": "email",
    }
    assert record["logging.googleapis.com/trace"] == f"projects/proj-1/traces/{TRACE_ID}"
    assert record["logging.googleapis.com/spanId"] == "0000000000000001"
    assert (record["event"], record["ready_count"], record["age"]) == ("signals", 4, 1.5)  # numbers stay numbers
    assert record["httpRequest"]["requestUrl"] == "http://localhost/confirm?[redacted]"  # never ?token=


def test_json_record_takes_the_trace_from_traceparent(log_lines):
    record = _record(log_lines, traceparent=f"00-{TRACE_ID}-b7ad6b7169203331-01")
    assert record["logging.googleapis.com/trace"] == f"projects/proj-1/traces/{TRACE_ID}"
    assert record["logging.googleapis.com/spanId"] == "b7ad6b7169203331"
    assert record["logging.googleapis.com/trace_sampled"] is True


def test_a_target_logs_with_the_request_trace(app_client, db, log_lines, monkeypatch):
    monkeypatch.setenv("LOG_FORMAT", "json")
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "proj-1")
    client = app_client("reconcile")  # main.py configures logging at import: JSON, into the sink
    response = client.post("/", headers={"X-Cloud-Trace-Context": f"{TRACE_ID}/7;o=1"})
    assert response.status_code == 200
    [run] = log_lines.events("reconcile")
    assert run["logging.googleapis.com/trace"] == f"projects/proj-1/traces/{TRACE_ID}"
    assert run["logging.googleapis.com/labels"]["deployment"] == "test"


# A link token's shape (256 bits, base64url): what a scanner or a crafted client could put there.
UA_TOKEN = "dHR0dHR0dHR0dHR0dHR0dHR0dHR0dHR0dHR0dHR0dHQ"
PLANTED_USER_AGENT = f"Mozilla/5.0 (Linux; Android 14; token={UA_TOKEN}) LinkScanner/{UA_TOKEN} ada@example.com"


def test_the_user_agent_is_logged_redacted_like_the_query(log_lines):
    record = _record(log_lines, **{"User-Agent": PLANTED_USER_AGENT})
    assert UA_TOKEN not in log_lines.text() and "ada@example.com" not in log_lines.text()
    agent = record["httpRequest"]["userAgent"]
    assert agent.startswith("Mozilla/5.0 LinkScanner/[redacted]")  # product tokens kept, comments gone
    assert "Android" not in agent


def test_a_long_user_agent_is_cut(log_lines):
    record = _record(log_lines, **{"User-Agent": "x/1 " * 500})
    assert 0 < len(record["httpRequest"]["userAgent"]) <= 200


def test_a_target_logs_no_token_shaped_user_agent(app_client, db, log_lines, monkeypatch):
    monkeypatch.setenv("LOG_FORMAT", "json")
    client = app_client("create_verification")
    body = {"account_id": "acct-ua", "channel": "email", "destination": "ua@example.com"}
    headers = {"User-Agent": PLANTED_USER_AGENT, "Idempotency-Key": "ua-1"}
    assert client.post("/", json=body, headers=headers).status_code == 201
    assert [r for r in log_lines.records() if "userAgent" in r.get("httpRequest", {})], "request records kept"
    assert UA_TOKEN not in log_lines.text()


def test_a_target_logs_no_destination_or_code_from_the_path_or_user_agent_as_sent(
    app_client, db, log_lines, monkeypatch
):
    """What an outsider controls, planted where the structured handler copies it: the path as sent
    (percent-encoded), an apostrophe-quoted code in the User-Agent, an IDN address and a national number."""
    monkeypatch.setenv("LOG_FORMAT", "json")
    client = app_client("confirm_verification")
    path = "/ada.lovelace%40b%C3%BCcher.de/%2B14155550123/07700%20900123"
    agent = "Scanner/1.0 code='123456' token='c2hvcnQ' josé@bücher.de (415) 555-0123"
    answer = client.post(path + "?token=" + UA_TOKEN, json={"token": "x" * 43}, headers={"User-Agent": agent})
    assert answer.status_code == 404  # an unknown link: refused, and logged while serving the request
    text = log_lines.text()
    for planted in ("ada.lovelace", "4155550123", "900123", "123456", "c2hvcnQ", "josé", "555-0123", UA_TOKEN):
        assert planted not in text, planted
    urls = [r["httpRequest"]["requestUrl"] for r in log_lines.records() if "requestUrl" in r.get("httpRequest", {})]
    assert urls and all(u.endswith("?[redacted]") and "***@" in u for u in urls), urls


# -- the safety net ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "raw, masked",
    [
        ("sent to ada.lovelace@example.com", "sent to a***@example.com"),
        ("sms to +14155550123 queued", "sms to +1******0123 queued"),
        ("sms to +1 (415) 555-0123", "sms to +1******0123"),
        ("GET /confirm?token=Zm9vYmFy&x=1", "GET /confirm?token=[redacted]&x=1"),
        ('{"link_token": "abc"}', '{"link_token": "[redacted]"}'),
        ("code=123456 rejected", "code=[redacted] rejected"),
        ("link " + "A" * 43 + " rendered", "link [redacted] rendered"),
        ("link " + "B" * 22 + "A" * 43 + " rendered", "link [redacted] rendered"),  # id, then token
        # what operators need stays readable
        ("smtp reply code=550 5.1.1", "smtp reply code=550 5.1.1"),
        ("twilio code: 21211", "twilio code: 21211"),
        (
            "verification 0b7f6c1e-5d0e-4a43-9f0a-2f1a4d3c2b1a intent 17 lease_version=3",
            "verification 0b7f6c1e-5d0e-4a43-9f0a-2f1a4d3c2b1a intent 17 lease_version=3",
        ),
        ("already masked u***@example.com +1******4567", "already masked u***@example.com +1******4567"),
    ],
)
def test_redaction_masks_what_looks_like_a_destination_or_secret(raw, masked):
    assert redact_text(raw) == masked


def test_the_filter_covers_arguments_fields_and_tracebacks(log_lines):
    try:
        raise ValueError("provider said: bad recipient bob@example.org")
    except ValueError:
        _log.exception(
            "send to %s failed",
            "+447700900123",
            extra={"json_fields": {"destination": "bob@example.org", "nested": ["ok", "+447700900123"]}},
        )
    text = log_lines.text()
    assert "bob@example.org" not in text and "+447700900123" not in text
    [record] = log_lines.records()
    assert record["destination"] == "b***@example.org" and record["nested"] == ["ok", "+4*******0123"]
    assert "Traceback" in record["message"] and "b***@example.org" in record["message"]


# -- a whole scenario, every line checked ----------------------------------------------------------
def _dispatch_present() -> bool:
    return "def dispatch(" in (ROOT / "functions" / "main.py").read_text()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _secrets_of(db, digits: int = 6) -> tuple[list[str], list[str], list[str]]:
    """Every token, code and destination of the scenario, derived from the rows and the test keyring."""
    keyring = Keyring.parse(TEST_TOKEN_KEYS)
    tokens, codes, destinations = [], [], []
    for row in db.rows("SELECT id, channel, destination, key_id, token_nonce FROM verifications"):
        key = keyring.get(row["key_id"])
        if row["channel"] == "email":
            tokens.append(key.link(row["id"], row["token_nonce"]))
        else:
            codes.append(key.sms_code(row["id"], row["token_nonce"], digits))
        destinations.append(row["destination"])
    return tokens, codes, destinations


@pytest.mark.skipif(not _dispatch_present(), reason="needs the `dispatch` target in functions/main.py")
def test_full_scenario_logs_no_token_code_or_destination(app_client, db, log_lines, monkeypatch):
    monkeypatch.setenv("LOG_FORMAT", "json")
    # The first dispatch meets an SMTP server that refuses: a transient failure, retried later.
    monkeypatch.setenv("EMAIL_TRANSPORT", "smtp")
    monkeypatch.setenv("SMTP_HOST", "127.0.0.1")
    monkeypatch.setenv("SMTP_PORT", str(_closed_port()))
    runtime.reset()
    create = app_client("create_verification")
    people = [("email", "Ada.Lovelace@example.com"), ("sms", "+14155550123"), ("email", "grace@example.org")]
    ids = []
    for i, (channel, destination) in enumerate(people):
        response = create.post(
            "/",
            json={"account_id": f"acct-{i}", "channel": channel, "destination": destination},
            headers={"Idempotency-Key": f"scenario-{i}"},
        )
        assert response.status_code == 201, response.get_data(as_text=True)
        ids.append(response.get_json()["verification_id"])
    assert (
        create.post(
            "/",
            json={"account_id": "x", "channel": "email", "destination": "not-an-address"},
            headers={"Idempotency-Key": "bad"},
        ).status_code
        == 400
    )

    dispatch = app_client("dispatch")
    first = dispatch.post("/").get_json()
    assert first["retryable"] == 2 and first["accepted"] == 1  # SMS (console) went, email retries

    # The retry: the mail server is back (console transport), the back-off is over.
    monkeypatch.setenv("EMAIL_TRANSPORT", "console")
    runtime.reset()
    db.run("UPDATE delivery_intents SET next_attempt_at = now() WHERE status = 'retryable'")
    second = app_client("dispatch").post("/").get_json()
    assert second["accepted"] == 2

    tokens, codes, destinations = _secrets_of(db)
    confirm = app_client("confirm_verification")
    assert confirm.get(f"/?token={tokens[0]}").status_code == 200  # the page; changes nothing
    assert confirm.post("/", data={"token": tokens[0]}).status_code == 200
    assert confirm.post("/", json={"token": tokens[1]}).status_code == 200
    assert confirm.post("/", json={"token": tokens[1]}).status_code == 200  # already verified
    sms_id = ids[1]
    wrong = "000000" if codes[0] != "000000" else "111111"
    assert confirm.post("/", json={"verification_id": sms_id, "code": wrong}).status_code == 422
    assert confirm.post("/", json={"verification_id": sms_id, "code": codes[0]}).status_code == 200
    assert confirm.post("/", json={"token": "x" * 43}).status_code == 404
    assert app_client("reconcile").post("/").status_code == 200
    assert app_client("status").get("/").status_code == 200

    text = log_lines.text()
    records = log_lines.records()
    assert {"dispatch_summary", "confirm", "reconcile", "signals"} <= {r.get("event") for r in records}
    assert "***@example.com" in text or "+1******0123" in text  # destinations appear, masked
    for secret in tokens + codes:
        assert secret not in text
    for destination in destinations:
        assert destination.lower() not in text.lower()
        assert destination.lstrip("+") not in text  # nor the bare number
    assert str(uuid.UUID(ids[0])) in text or any(r.get("verification_id") == ids[0] for r in records)
