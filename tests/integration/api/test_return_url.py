"""Create's return_url through the real endpoints: checked, stored, part of the
idempotency fingerprint, and the way back on the confirmation pages (en and ja); never an open redirect."""

from __future__ import annotations

import re
import uuid

import pytest

from signup_verification import runtime
from signup_verification.verifications.tokens import Keyring
from support.paths import TEST_TOKEN_KEYS
from support.signup_requests import post_create

KEYRING = Keyring.parse(TEST_TOKEN_KEYS)
SITE = "https://app.example.com"
BACK = SITE + "/accounts/42?step=verified&x=<b>"


@pytest.fixture
def clients(service_env, monkeypatch, app_client):
    monkeypatch.setenv("RETURN_URL_ALLOWED_ORIGINS", f"{SITE},https://www.example.com")
    monkeypatch.setenv("PRODUCT_NAME", "Acme")
    runtime.reset()
    return app_client("create_verification"), app_client("confirm_verification")


def _body(**extra) -> dict:
    unique = uuid.uuid4().hex[:8]
    return {"account_id": f"a-{unique}", "channel": "email", "destination": f"ada.{unique}@example.com", **extra}


def _token(db, verification_id: str) -> str:
    row = db.one("SELECT * FROM verifications WHERE id = :id", id=uuid.UUID(verification_id))
    return KEYRING.get(row["key_id"]).link(row["id"], bytes(row["token_nonce"]))


def _continue_link(page: str) -> str | None:
    found = re.search(r'<a class="button" href="([^"]*)"', page)
    return found.group(1) if found else None


def test_an_allowed_return_url_is_stored_and_read_back(clients, db):
    create, _ = clients
    response = post_create(create, _body(return_url=BACK))
    assert response.status_code == 201
    verification_id = response.get_json()["verification_id"]
    assert db.one("SELECT return_url FROM verifications WHERE id = :id", id=uuid.UUID(verification_id)) == {
        "return_url": BACK
    }
    assert create.get(f"/{verification_id}").get_json()["return_url"] == BACK


@pytest.mark.parametrize(
    "url",
    ["https://evil.example/phish", "http://app.example.com/", "https://app.example.com@evil.example/", "/relative"],
)
def test_a_return_url_off_the_list_is_a_400_field_error_that_writes_nothing(clients, db, url):
    create, _ = clients
    response = post_create(create, _body(return_url=url))
    assert response.status_code == 400 and response.mimetype == "application/problem+json"
    assert [e["pointer"] for e in response.get_json()["errors"]] == ["#/return_url"]
    assert url not in response.get_data(as_text=True)
    assert db.run("SELECT (SELECT count(*) FROM verifications) + (SELECT count(*) FROM idempotency_keys)")[0][0] == 0


def test_the_return_url_is_part_of_the_idempotency_fingerprint(clients):
    create, _ = clients
    body = _body(return_url=BACK)
    assert post_create(create, body, key="k-return").status_code == 201
    assert post_create(create, body, key="k-return").headers.get("Idempotent-Replayed") == "true"
    other = post_create(create, {**body, "return_url": SITE + "/elsewhere"}, key="k-return")
    assert other.status_code == 422
    assert post_create(create, {k: v for k, v in body.items() if k != "return_url"}, key="k-return").status_code == 422


def test_without_return_url_the_fingerprint_is_the_one_stored_before_issue_12():
    from signup_verification.api.create import fingerprint
    from signup_verification.api.models import CreateVerificationRequest

    request = CreateVerificationRequest(account_id="a", channel="email", destination="ada@example.com")
    # The digest of the canonical JSON without the field: keys stored before this release still replay.
    import hashlib
    import json

    before = {k: v for k, v in request.model_dump().items() if k not in ("return_url", "fallback", "steps")}
    assert (
        fingerprint(request)
        == hashlib.sha256(json.dumps(before, sort_keys=True, separators=(",", ":")).encode()).digest()
    )


def test_the_verified_and_already_confirmed_pages_continue_to_the_site(clients, db):
    create, confirm = clients
    token = _token(db, post_create(create, _body(return_url=BACK)).get_json()["verification_id"])
    verified = confirm.post("/", data={"token": token})
    page = verified.get_data(as_text=True)
    assert verified.status_code == 200 and "Continue to Acme" in page
    assert _continue_link(page) == BACK.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")  # escaped
    assert verified.headers["Referrer-Policy"] == "no-referrer"  # the site never sees the confirm URL
    again = confirm.post("/", data={"token": token}).get_data(as_text=True)
    assert "Already confirmed" in again and _continue_link(again) is not None


def test_the_pages_speak_the_verifications_locale(clients, db):
    create, confirm = clients
    token = _token(db, post_create(create, _body(return_url=BACK, locale="ja")).get_json()["verification_id"])
    page = confirm.post("/", data={"token": token}).get_data(as_text=True)
    assert "Acme に進む" in page and _continue_link(page)


def test_without_return_url_the_pages_keep_their_words_and_no_link(clients, db):
    create, confirm = clients
    token = _token(db, post_create(create, _body()).get_json()["verification_id"])
    page = confirm.post("/", data={"token": token}).get_data(as_text=True)
    assert "return to Acme" in page and "<a " not in page


def test_dead_verifications_link_back_to_the_site(clients, db):
    create, confirm = clients
    account = f"a-{uuid.uuid4().hex[:8]}"
    first = post_create(create, {**_body(return_url=BACK), "account_id": account}).get_json()["verification_id"]
    old_token = _token(db, first)
    second = post_create(create, {**_body(return_url=SITE + "/second"), "account_id": account})
    assert second.status_code == 201
    superseded = confirm.get("/", query_string={"token": old_token})
    assert superseded.status_code == 410 and "Back to Acme" in superseded.get_data(as_text=True)

    expired_id = second.get_json()["verification_id"]
    db.run(
        "UPDATE verifications SET created_at = now() - interval '1 hour', expires_at = now() - interval '1 second'"
        " WHERE id = :id",
        id=uuid.UUID(expired_id),
    )
    expired = confirm.get("/", query_string={"token": _token(db, expired_id)}).get_data(as_text=True)
    assert "This link has expired" in expired and f'href="{SITE}/second"' in expired

    locked_id = post_create(create, _body(return_url=BACK)).get_json()["verification_id"]
    db.run("UPDATE verifications SET status = 'locked' WHERE id = :id", id=uuid.UUID(locked_id))
    locked = confirm.get("/", query_string={"token": _token(db, locked_id)}).get_data(as_text=True)
    assert "locked" in locked and "Back to Acme" in locked


def test_nothing_from_the_link_can_choose_where_the_page_points(clients, db):
    create, confirm = clients
    token = _token(db, post_create(create, _body(return_url=BACK)).get_json()["verification_id"])
    page = confirm.post(
        "/?return_url=https://evil.example/&next=https://evil.example/",
        data={"token": token, "return_url": "https://evil.example/"},
    ).get_data(as_text=True)
    assert "evil.example" not in page and _continue_link(page)
