"""Secret hygiene, checked the way an attacker or an auditor would look.

* After a full scenario (create email + SMS, a transient failure and its retry, dispatch, confirm,
  reconcile, status) every column of every table, cast to text, and every captured log line is
  scanned for the plaintext tokens and codes that were issued: none may be there.
* Guessing an SMS code is stopped by the attempt limit, and new codes cannot be minted quickly.
* bandit finds nothing (pyproject's [tool.bandit] lists the justified skips), and the dependency
  audit fails on a known vulnerability and says when it could not look.
(Caller identity, the platform's and the signed mode's: test_caller_identity.py.)
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import uuid

import pytest

from signup_verification import runtime
from signup_verification.config import load
from signup_verification.platform import logs as service_logging
from signup_verification.verifications.tokens import Keyring
from support.fakes.smtp import FakeSmtpServer
from support.fakes.twilio import FakeTwilio
from support.paths import ROOT, TEST_TOKEN_KEYS
from support.policy import token_in

KEYRING = Keyring.parse(TEST_TOKEN_KEYS)
_LINK_TOKEN = re.compile(
    r"token=(?:[A-Za-z0-9_-]{22})?([A-Za-z0-9_-]{43})(?![A-Za-z0-9_-])"
)  # the secret part of a link


def code_pattern(code: str) -> re.Pattern:
    """The code as a value of its own: not inside a longer hex or decimal run (uuids, digests, timestamps)."""
    return re.compile(rf"(?<![0-9A-Fa-f.:]){code}(?![0-9A-Fa-f])")


def leaks(text: str, token: str, code: str) -> list[str]:
    found = []
    if token in text:
        found.append("link token")
    if code_pattern(code).search(text):
        found.append("sms code")
    return found


def every_row_as_text(db) -> dict[str, list[str]]:
    tables = [
        r[0]
        for r in db.run(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1"
        )
    ]
    return {
        t: [r[0] for r in db.run(f'SELECT CAST(t AS text) FROM "{t}" AS t')] for t in tables
    }  # names from the catalogue


@pytest.fixture
def providers(service_env, monkeypatch):
    with FakeSmtpServer() as smtp, FakeTwilio() as twilio:
        for name, value in {
            "EMAIL_TRANSPORT": "smtp",
            "SMTP_HOST": smtp.host,
            "SMTP_PORT": str(smtp.port),
            "SMS_TRANSPORT": "twilio",
            "TWILIO_ACCOUNT_SID": twilio.account_sid,
            "TWILIO_AUTH_TOKEN": twilio.auth_token,
            "TWILIO_FROM": "+15005550006",
            "TWILIO_API_URL": twilio.url,
            "EMAIL_FROM": "Signup <no-reply@example.org>",
            "LOG_FORMAT": "json",
            "LOG_LEVEL": "DEBUG",
            "RATE_LIMIT_SPACING_SECONDS": "0",
        }.items():
            monkeypatch.setenv(name, value)
        runtime.reset()
        yield smtp, twilio


def test_no_issued_token_or_code_in_any_table_log_line_or_api_answer(app_client, db, providers):
    smtp, twilio = providers
    sink = io.StringIO()
    answers: list[str] = []  # every API answer except the Confirm page (which must carry the token to post it back)

    def keep(response):
        answers.append(json.dumps(dict(response.headers)) + response.get_data(as_text=True))
        return response

    with service_logging.use_sink(sink):
        create, dispatch = app_client("create_verification"), app_client("dispatch")
        confirm, reconcile, status = app_client("confirm_verification"), app_client("reconcile"), app_client("status")
        service_logging.configure(load().logging)  # JSON lines (LOG_FORMAT=json), as on Cloud Run
        email = keep(
            create.post(
                "/",
                json={"account_id": "acct-sec", "channel": "email", "destination": "ada@example.com"},
                headers={"Idempotency-Key": "sec-email"},
            )
        )
        sms = keep(
            create.post(
                "/",
                json={"account_id": "acct-sec", "channel": "sms", "destination": "+14155550123"},
                headers={"Idempotency-Key": "sec-sms"},
            )
        )
        keep(
            create.post(
                "/",
                json={"account_id": "acct-sec", "channel": "sms", "destination": "+14155550123"},
                headers={"Idempotency-Key": "sec-sms"},
            )
        )  # replayed from the idempotency store
        assert (email.status_code, sms.status_code) == (201, 201)
        # First attempt of each fails transiently, the retry goes through.
        smtp.behaviour.data_reply = "451 4.3.0 try again later"
        twilio.script(FakeTwilio.error(429, 20429, "Too Many Requests", headers={"Retry-After": "1"}))
        first = keep(dispatch.post("/")).get_json()
        assert first["retryable"] == 2, first
        smtp.behaviour.data_reply = None
        db.run("UPDATE delivery_intents SET next_attempt_at = now()")
        db.run("DELETE FROM channel_pacing")  # the 429's slow-down (its Retry-After) is over too
        assert keep(dispatch.post("/")).get_json()["accepted"] == 2
        text = smtp.received[0].message.get_body(("plain",)).get_content()
        token = _LINK_TOKEN.search(text).group(1)  # the secret: what must never be stored or logged
        carried = token_in(text)  # what the link carries: the id, then the token
        code = re.search(r"\b(\d{6})\b", twilio.deliveries[0].body).group(1)
        assert leaks(smtp.received[0].data.decode(), token, code) == ["link token"]  # the detector works...
        assert leaks(twilio.deliveries[0].body, token, code) == ["sms code"]  # ...on both kinds
        page = confirm.get("/", query_string={"token": carried})
        assert page.status_code == 200 and carried in page.get_data(as_text=True)  # the form posts it back
        assert confirm.post("/", data={"token": carried}).status_code == 200
        keep(confirm.post("/", json={"token": carried}))
        wrong = f"{(int(code) + 1) % 10**6:06d}"
        sms_id = sms.get_json()["verification_id"]
        assert keep(confirm.post("/", json={"verification_id": sms_id, "code": wrong})).status_code == 422
        assert (
            keep(confirm.post("/", json={"verification_id": sms_id, "code": code[:3] + " " + code[3:]})).status_code
            == 200
        )
        keep(reconcile.post("/"))
        keep(status.get("/"))
        for created in (email, sms):  # the read API after all of it
            assert keep(create.get("/" + created.get_json()["verification_id"])).status_code == 200
    lines = sink.getvalue().splitlines()
    assert len(lines) >= 8 and all(json.loads(line) for line in lines)  # the structured output was captured
    events = {json.loads(line).get("event") for line in lines}
    assert {"confirm", "send_outcome", "dispatch_summary", "reconcile"} <= events, events
    for number, line in enumerate(lines):
        assert not leaks(line, token, code), f"log line {number}: {line[:300]}"
    for answer in answers:
        assert not leaks(answer, token, code), answer[:300]
    rows = every_row_as_text(db)
    assert {"verifications", "delivery_intents", "delivery_attempts", "idempotency_keys"} <= set(rows)
    assert sum(len(r) for r in rows.values()) >= 8
    for table, texts in rows.items():
        for text in texts:
            assert not leaks(text, token, code), f"{table}: {text[:300]}"
            assert token.encode().hex() not in text  # nor the token's bytes in a bytea column


# -- guessing codes ----------------------------------------------------------------------------------
def real_code(db, verification_id: str) -> str:
    row = db.one("SELECT key_id, token_nonce FROM verifications WHERE id = :id", id=uuid.UUID(verification_id))
    return KEYRING.get(row["key_id"]).sms_code(uuid.UUID(verification_id), bytes(row["token_nonce"]))


def test_confirm_code_brute_force_is_stopped_by_the_attempt_limit(app_client, db):
    create, confirm = app_client("create_verification"), app_client("confirm_verification")
    body = {"account_id": "acct-bf", "channel": "sms", "destination": "+14155550199"}
    vid = create.post("/", json=body, headers={"Idempotency-Key": "bf-1"}).get_json()["verification_id"]
    code = real_code(db, vid)
    guesses = [f"{(int(code) + k) % 10**6:06d}" for k in range(1, 6)]
    assert confirm.post("/", json={"verification_id": vid, "code": "12a456"}).status_code == 400  # a slip: not a try
    for number, guess in enumerate(guesses[:4], start=1):
        answer = confirm.post("/", json={"verification_id": vid, "code": guess})
        assert answer.status_code == 422 and answer.get_json()["remaining_attempts"] == 5 - number
    locked = confirm.post("/", json={"verification_id": vid, "code": guesses[4]})
    assert locked.status_code == 410 and locked.get_json()["type"].endswith("/verification-locked")
    # Even the right code cannot open it now; its SMS was never sent, so it is one more wrong code too.
    assert confirm.post("/", json={"verification_id": vid, "code": code}).status_code == 410
    row = db.one("SELECT status, verified_at, confirm_failures FROM verifications WHERE id = :id", id=uuid.UUID(vid))
    assert (row["status"], row["verified_at"], row["confirm_failures"]) == ("locked", None, 6)
    # And a fresh code for the same number cannot be minted at once (60 s spacing, 5 an hour).
    again = create.post("/", json={**body, "account_id": "acct-bf-2"}, headers={"Idempotency-Key": "bf-2"})
    assert again.status_code == 429 and int(again.headers["Retry-After"]) > 0
    assert app_client("reconcile").post("/").status_code == 200
    assert db.one("SELECT status, suppression_reason FROM delivery_intents") == {
        "status": "suppressed",
        "suppression_reason": "locked",
    }  # its message is never sent now


# -- static analysis ---------------------------------------------------------------------------------
def test_bandit_finds_nothing():
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bandit",
            "-c",
            "pyproject.toml",
            "-r",
            "shared",
            "functions",
            "tools",
            "-f",
            "json",
            "-q",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = json.loads(done.stdout)
    findings = [f"{r['filename']}:{r['line_number']} {r['test_id']} {r['issue_text']}" for r in report["results"]]
    assert findings == [] and done.returncode == 0, "\n".join(findings) or done.stderr[-2000:]
    assert report["metrics"]["_totals"]["loc"] > 3000  # it really scanned the code


# -- dependency audit ---------------------------------------------------------------------------------------
def _fake_pip_audit(tmp_path, dependencies: list[dict]):
    script = tmp_path / "pip-audit"
    script.write_text(f"#!{sys.executable}\nimport json\nprint(json.dumps({{'dependencies': {dependencies!r}}}))\n")
    script.chmod(0o755)
    return script


def _audit(script, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / "audit_dependencies.py"), "--pip-audit", str(script), *extra],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin"},
    )


def test_the_dependency_audit_fails_on_a_known_vulnerability_and_says_when_it_could_not_look(tmp_path):
    vulnerable = _fake_pip_audit(
        tmp_path,
        [
            {"name": "flask", "version": "3.1.3", "vulns": [{"id": "GHSA-xxxx-yyyy-zzzz", "fix_versions": ["3.1.4"]}]},
            {"name": "pg8000", "version": "1.31", "vulns": []},
        ],
    )
    found = _audit(vulnerable)
    assert found.returncode == 1 and "flask 3.1.3: GHSA-xxxx-yyyy-zzzz (fixed in 3.1.4)" in found.stdout
    unreachable = _fake_pip_audit(
        tmp_path,
        [{"name": "flask", "version": "3.1.3", "skip_reason": "Dependency not found on PyPI and could not be audited"}],
    )
    blind = _audit(unreachable)
    assert blind.returncode == 0 and "NOT AUDITED" in blind.stdout
    assert _audit(unreachable, "--require").returncode == 1
