"""confirm_verification: GET shows a page and changes nothing; POST consumes once (form -> page, JSON -> JSON)."""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
import uuid

import pytest

from signup_verification import runtime
from signup_verification.config import load
from signup_verification.platform.database import Database
from signup_verification.verifications import confirm as confirmations
from signup_verification.verifications.tokens import Keyring
from support.factories import created
from support.paths import TEST_TOKEN_KEYS
from support.policy import sent


def _create(
    db: Database,
    channel: str = "email",
    account: str | None = None,
    destination: str | None = None,
    keys: str = TEST_TOKEN_KEYS,
) -> dict:
    if destination is None:
        destination = f"{uuid.uuid4().hex[:8]}@example.com" if channel == "email" else "+14155550100"
    vid = created(db, destination, account=account, config=load().create, keyring=Keyring.parse(keys))
    return db.one("SELECT * FROM verifications WHERE id = :id", id=vid)


def _token(row: dict, keys: str = TEST_TOKEN_KEYS) -> str:
    return Keyring.parse(keys).get(row["key_id"]).link(row["id"], bytes(row["token_nonce"]))


def _code(row: dict) -> str:
    return Keyring.parse(TEST_TOKEN_KEYS).get(row["key_id"]).sms_code(row["id"], bytes(row["token_nonce"]), 6)


def _state(db: Database, row: dict) -> dict:
    return db.one(
        "SELECT status, verified_at, updated_at, confirm_failures FROM verifications WHERE id = :id", id=row["id"]
    )


def _expire(db: Database, row: dict) -> None:
    db.run(
        "UPDATE verifications SET created_at = now() - interval '1 hour', expires_at = now() - interval '1 second'"
        " WHERE id = :id",
        id=row["id"],
    )


@pytest.fixture
def client(app_client):
    return app_client("confirm_verification")


def _post_json(client, body):
    return client.post("/", data=json.dumps(body), content_type="application/json")


# -- the page (GET) -------------------------------------------------------------------------------
def test_get_shows_a_confirm_form_and_changes_nothing(client, db, service_env):
    row = _create(db, destination="ada@example.com")
    token = _token(row)
    before = _state(db, row)
    for _ in range(3):  # a mail scanner, a link preview, then the person
        response = client.get(f"/?token={token}")
        assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert '<form method="post">' in html and f'name="token" value="{token}"' in html
    assert "a***@example.com" in html and "ada@example.com" not in html
    assert _state(db, row) == before
    assert response.headers["Cache-Control"] == "no-store"
    assert response.headers["Referrer-Policy"] == "no-referrer"
    assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]
    assert response.headers["Content-Type"].startswith("text/html")


def test_the_page_uses_no_external_assets_and_its_style_matches_the_csp(client, db, service_env):
    response = client.get(f"/?token={_token(_create(db))}")
    html = response.get_data(as_text=True)
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    style = re.search(r"<style>(.*?)</style>", html, re.S).group(1)
    digest = base64.b64encode(__import__("hashlib").sha256(style.encode()).digest()).decode()
    assert f"'sha256-{digest}'" in response.headers["Content-Security-Policy"]
    assert '<meta name="viewport"' in html and '<html lang="en">' in html


# -- consuming a link -----------------------------------------------------------------------------
def test_form_post_verifies_then_the_same_link_says_already_verified(client, db, service_env):
    row = _create(db)
    token = _token(row)
    response = client.post("/", data={"token": token})
    assert response.status_code == 200
    assert "Email address confirmed" in response.get_data(as_text=True)
    assert "***@example.com</strong> is" in response.get_data(as_text=True)
    state = _state(db, row)
    assert state["status"] == "verified" and state["verified_at"] is not None

    again = client.post("/", data={"token": token})
    assert again.status_code == 200 and "Already confirmed" in again.get_data(as_text=True)
    assert client.get(f"/?token={token}").status_code == 200
    assert "Already confirmed" in client.get(f"/?token={token}").get_data(as_text=True)
    assert _state(db, row) == state


def test_verifying_suppresses_what_was_left_to_send(client, db, service_env):
    row = _create(db)
    client.post("/", data={"token": _token(row)})
    intent = db.one("SELECT status, suppression_reason FROM delivery_intents WHERE verification_id = :id", id=row["id"])
    assert intent == {"status": "suppressed", "suppression_reason": "verified"}


def test_json_token_confirmation(client, db, service_env):
    row = _create(db)
    response = _post_json(client, {"token": _token(row)})
    assert response.status_code == 200
    body = response.get_json()
    assert body["verification_id"] == str(row["id"]) and body["account_id"] == row["account_id"]
    assert body["status"] == "verified" and body["already_verified"] is False and body["verified_at"].endswith("Z")
    assert response.headers["Cache-Control"] == "no-store"
    again = _post_json(client, {"token": _token(row)}).get_json()
    assert again["already_verified"] is True and again["verified_at"] == body["verified_at"]


def test_expired_link_gets_the_expired_page_and_problem(client, db, service_env):
    row = _create(db)
    _expire(db, row)
    token = _token(row)
    page = client.get(f"/?token={token}")
    assert page.status_code == 410 and "This link has expired" in page.get_data(as_text=True)
    form = client.post("/", data={"token": token})
    assert form.status_code == 410 and "This link has expired" in form.get_data(as_text=True)
    problem = _post_json(client, {"token": token})
    assert problem.status_code == 410 and problem.mimetype == "application/problem+json"
    assert problem.get_json()["type"].endswith("/verification-expired")
    assert _state(db, row)["status"] == "pending"  # expiry is read from expires_at; nothing consumed


def test_superseded_link(client, db, service_env):
    old = _create(db, account="acct_sup", destination="one@example.com")
    _create(db, account="acct_sup", destination="two@example.com")
    token = _token(old)
    page = client.get(f"/?token={token}")
    assert page.status_code == 410 and "A newer link was sent" in page.get_data(as_text=True)
    problem = _post_json(client, {"token": token})
    assert problem.status_code == 410 and problem.get_json()["type"].endswith("/verification-superseded")
    assert _state(db, old)["status"] == "superseded"


@pytest.mark.parametrize("token", ["A" * 43, "short", "x" * 500, "", "../../etc/passwd"])
def test_unknown_or_malformed_token_reveals_nothing(client, db, service_env, token):
    row = _create(db, destination="grace@example.com")
    page = client.get("/", query_string={"token": token})
    assert page.status_code == 404 and "This link is not valid" in page.get_data(as_text=True)
    problem = _post_json(client, {"token": token})
    assert problem.status_code == 404
    text = problem.get_data(as_text=True) + page.get_data(as_text=True)
    for secret in (row["account_id"], "grace", "example.com", str(row["id"])):
        assert secret not in text
    assert _state(db, row)["status"] == "pending"


def test_missing_token_and_wrong_requests(client, db, service_env):
    assert client.get("/").status_code == 404
    assert client.post("/", data="", content_type="application/x-www-form-urlencoded").status_code == 404
    assert client.put("/", data="{}", content_type="application/json").status_code == 405
    assert client.post("/", data="token=x", content_type="text/plain").status_code == 415
    both = _post_json(client, {"token": "x", "code": "123456"})
    assert both.status_code == 400 and both.mimetype == "application/problem+json"
    assert _post_json(client, {"token": 5}).status_code == 400
    assert client.post("/", data="[1", content_type="application/json").status_code == 400


def test_concurrent_confirmations_verify_exactly_once(db, database_url, service_env):
    row = _create(db)
    token = _token(row)
    keyring = Keyring.parse(TEST_TOKEN_KEYS)
    threads, results, barrier = 8, [], threading.Barrier(8)

    def confirm() -> None:
        own = Database.from_url(database_url)
        try:
            barrier.wait()
            results.append(confirmations.confirm_link(own, keyring, token).result)
        finally:
            own.close()

    workers = [threading.Thread(target=confirm) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert sorted(results) == sorted([confirmations.VERIFIED] + [confirmations.ALREADY_VERIFIED] * (threads - 1))


def test_rotated_keys_still_confirm_and_a_removed_key_does_not(db, service_env):
    old_keys = "k-old:" + base64.urlsafe_b64encode(b"o" * 32).decode().rstrip("=")
    row = _create(db, keys=old_keys)
    token = _token(row, old_keys)
    without_old = Keyring.parse(TEST_TOKEN_KEYS)
    assert confirmations.preview_link(db, without_old, token).result == confirmations.INVALID
    rotated = Keyring.parse(f"{TEST_TOKEN_KEYS},{old_keys}")  # new signing key first, old still accepted
    assert confirmations.confirm_link(db, rotated, token).result == confirmations.VERIFIED


def test_database_down_shows_a_retry_page(app_client, service_env, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    runtime.reset()
    response = app_client("confirm_verification").get("/?token=" + "A" * 65)  # a link of the right shape: looked up
    assert response.status_code == 503 and response.headers["Retry-After"]
    assert "try again" in response.get_data(as_text=True).lower()


# -- SMS codes --------------------------------------------------------------------------------
def test_sms_code_verifies_and_spaces_are_accepted(client, db, service_env):
    row = _create(db, channel="sms")
    sent(db, row["id"], "sms")
    code = _code(row)
    response = _post_json(client, {"verification_id": str(row["id"]), "code": f"{code[:3]} {code[3:]}"})
    assert response.status_code == 200, response.get_json()
    assert response.get_json()["status"] == "verified" and response.get_json()["channel"] == "sms"
    assert _state(db, row)["status"] == "verified"
    again = _post_json(client, {"verification_id": str(row["id"]), "code": code})
    assert again.status_code == 200 and again.get_json()["already_verified"] is True


def _wrong(code: str) -> str:
    return str((int(code) + 1) % 10**6).zfill(6)


def test_wrong_codes_count_then_lock(client, db, service_env):
    row = _create(db, channel="sms", destination="+14155550101")
    code, vid = _code(row), str(row["id"])
    for remaining in (4, 3, 2, 1):
        response = _post_json(client, {"verification_id": vid, "code": _wrong(code)})
        assert response.status_code == 422
        assert response.get_json()["remaining_attempts"] == remaining
    last = _post_json(client, {"verification_id": vid, "code": _wrong(code)})
    assert last.status_code == 410 and last.get_json()["type"].endswith("/verification-locked")
    assert _state(db, row)["status"] == "locked" and _state(db, row)["confirm_failures"] == 5
    # The right code no longer helps, and a locked verification has nothing left to send.
    assert _post_json(client, {"verification_id": vid, "code": code}).status_code == 410
    intent = db.one("SELECT status, suppression_reason FROM delivery_intents WHERE verification_id = :id", id=row["id"])
    assert intent == {"status": "suppressed", "suppression_reason": "locked"}


def test_concurrent_wrong_codes_never_exceed_the_limit(db, database_url, service_env):
    row = _create(db, channel="sms", destination="+14155550102")
    keyring, wrong, results = Keyring.parse(TEST_TOKEN_KEYS), _wrong(_code(row)), []
    barrier = threading.Barrier(8)

    def attempt() -> None:
        own = Database.from_url(database_url)
        try:
            barrier.wait()
            results.append(confirmations.confirm_code(own, keyring, row["id"], wrong).result)
        finally:
            own.close()

    workers = [threading.Thread(target=attempt) for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    # it locks exactly once, at the limit; every try is charged, those after the lock too
    assert _state(db, row)["confirm_failures"] == 8 and _state(db, row)["status"] == "locked"
    assert results.count(confirmations.WRONG_CODE) == 4
    # the one that locked it, then the rest: those that raced past the state read find it locked,
    # those that read it after the lock hear what any finished verification answers
    assert results.count(confirmations.LOCKED) >= 1
    assert results.count(confirmations.LOCKED) + results.count(confirmations.FINISHED) == 4


# Full-width digits are normalised (NFKC): only a wrong count or another script is malformed.
@pytest.mark.parametrize("code", ["12345", "1234567", "12a456", "١٢٣٤٥٦", "１２３４５", ""])
def test_malformed_codes_are_refused_without_counting(client, db, service_env, code):
    row = _create(db, channel="sms", destination="+14155550103")
    response = _post_json(client, {"verification_id": str(row["id"]), "code": code})
    assert response.status_code == 400
    assert response.get_json()["errors"][0]["pointer"] == "#/code"
    assert _state(db, row)["confirm_failures"] == 0


def test_unknown_verification_or_wrong_channel_is_a_generic_404(client, db, service_env):
    email = _create(db)
    for vid in (str(uuid.uuid4()), str(email["id"])):
        response = _post_json(client, {"verification_id": vid, "code": "123456"})
        assert response.status_code == 404 and response.get_json()["type"].endswith("/verification-not-found")
    assert _post_json(client, {"verification_id": "nope", "code": "123456"}).status_code == 400
    assert _state(db, email)["confirm_failures"] == 0


def test_a_wrong_code_for_an_expired_verification_is_finished_and_counted(client, db, service_env):
    row = _create(db, channel="sms", destination="+14155550104")
    sent(db, row["id"], "sms")
    _expire(db, row)
    response = _post_json(client, {"verification_id": str(row["id"]), "code": _wrong(_code(row))})
    assert response.status_code == 410 and response.get_json()["type"].endswith("/verification-finished")
    assert _state(db, row)["confirm_failures"] == 1  # guessing after the end is charged too
    right = _post_json(client, {"verification_id": str(row["id"]), "code": _code(row)})
    assert right.status_code == 410 and right.get_json() == response.get_json()  # the same answer, not counted
    assert _state(db, row)["confirm_failures"] == 1


def test_no_token_or_code_in_logs(client, db, service_env, caplog):
    caplog.set_level(logging.DEBUG)
    email, sms = _create(db), _create(db, channel="sms", destination="+14155550105")
    token, code = _token(email), _code(sms)
    client.get(f"/?token={token}")
    client.post("/", data={"token": token})
    _post_json(client, {"verification_id": str(sms["id"]), "code": _wrong(code)})
    _post_json(client, {"verification_id": str(sms["id"]), "code": code})
    logged = "\n".join(f"{r.getMessage()} {getattr(r, 'json_fields', '')}" for r in caplog.records)
    assert "confirmation verified" in logged
    assert token not in logged and code not in logged and _wrong(code) not in logged
