"""The hosted code-entry page through the real endpoints: the create answer and the read API give its
URL when an SMS is among the channels; it is a one-field form that confirms the code with the API's
limits, ends on the confirmed page with its way back, shows the number masked only, and opens for
nobody without the handle only the server's key makes."""

from __future__ import annotations

import re
import uuid
from urllib.parse import parse_qs, urlsplit

import pytest

from signup_verification import runtime
from signup_verification.verifications.tokens import Keyring
from support.paths import TEST_TOKEN_KEYS
from support.policy import sent
from support.signup_requests import created_json, signup_body
from support.webhooks import link_token, sms_code

KEYRING = Keyring.parse(TEST_TOKEN_KEYS)
BASE = "https://verify.example.org/confirm?src=sms"
SITE = "https://app.example.org"


@pytest.fixture
def targets(configured_app):
    create = configured_app("create_verification", VERIFY_LINK_BASE=BASE, RETURN_URL_ALLOWED_ORIGINS=SITE)
    return create, configured_app("confirm_verification", VERIFY_LINK_BASE=BASE, RETURN_URL_ALLOWED_ORIGINS=SITE)


def _create(create, **body) -> dict:
    return created_json(create, signup_body(**{"destination": "+14155550142", **body}))


def _entry(url: str) -> str:
    assert url.startswith(BASE + "&entry=")
    return parse_qs(urlsplit(url).query)["entry"][0]


def _form(page: str) -> dict[str, str]:
    return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', page))


def test_the_url_is_on_the_confirm_base_whenever_an_sms_is_among_the_channels(targets, db):
    create, _ = targets
    sms = _create(create)
    fallback = _create(
        create, channel="email", destination="ada@example.com",
        fallback={"channel": "sms", "destination": "+14155550143", "after_seconds": 30},
    )  # fmt: skip
    email_only = _create(create, channel="email", destination="grace@example.com")
    assert "code_entry_url" not in email_only
    for created in (sms, fallback):
        handle = _entry(created["code_entry_url"])
        assert len(handle) == 44 and "+1415" not in created["code_entry_url"]
        read = create.get("/" + created["verification_id"]).get_json()
        assert read["code_entry_url"] == created["code_entry_url"]  # the same page, whoever asks
    assert create.get("/" + email_only["verification_id"]).get_json()["code_entry_url"] is None
    replayed = create.post(
        "/", json={"account_id": "r", "channel": "sms", "destination": "+14155550144"}, headers={"Idempotency-Key": "r"}
    )
    again = create.post(
        "/", json={"account_id": "r", "channel": "sms", "destination": "+14155550144"}, headers={"Idempotency-Key": "r"}
    )
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.get_json()["code_entry_url"] == replayed.get_json()["code_entry_url"]


def test_the_form_confirms_the_code_and_ends_on_the_confirmed_page_with_its_way_back(targets, db):
    create, confirm = targets
    created = _create(create, return_url=SITE + "/welcome", locale="en")
    handle = _entry(created["code_entry_url"])
    shown = confirm.get("/?entry=" + handle)
    page = shown.get_data(as_text=True)
    assert shown.status_code == 200 and "Enter your code" in page and "+1******0142" in page
    assert "4155550142" not in page and shown.headers["Cache-Control"] == "no-store"
    assert "form-action 'self'" in shown.headers["Content-Security-Policy"]
    assert re.search(r'<input id="code" name="code" type="text" autocomplete="one-time-code" inputmode="numeric"', page)
    assert _form(page) == {"entry": handle}
    vid = uuid.UUID(created["verification_id"])
    sent(db, vid, "sms")
    code = sms_code(db, vid)
    done = confirm.post("/", data={"entry": handle, "code": f"{code[:3]} {code[3:]}"})
    page = done.get_data(as_text=True)
    assert done.status_code == 200 and "Phone number confirmed" in page and "+1******0142" in page
    assert f'href="{SITE}/welcome"' in page and "Continue to" in page
    assert create.get(f"/{vid}").get_json()["proofs"][0]["channel"] == "sms"
    assert "Already confirmed" in confirm.get("/?entry=" + handle).get_data(as_text=True)


def _email_then_sms(create) -> tuple[str, uuid.UUID]:
    created = _create(
        create, channel="email", destination="ada@example.com",
        fallback={"channel": "sms", "destination": "+14155550143", "after_seconds": 30},
    )  # fmt: skip
    return _entry(created["code_entry_url"]), uuid.UUID(created["verification_id"])


def test_the_sms_code_proves_only_once_its_sms_was_sent_before_it_a_wrong_code(targets, db):
    create, confirm = targets
    handle, vid = _email_then_sms(create)
    code = sms_code(db, vid)
    assert "Enter your code" in confirm.get("/?entry=" + handle).get_data(as_text=True)  # the form waits for it
    early = confirm.post("/", data={"entry": handle, "code": code})  # the SMS is not due yet: nobody has it
    assert early.status_code == 422 and "You can try 4 more times" in early.get_data(as_text=True)
    sent(db, vid, "sms")
    done = confirm.post("/", data={"entry": handle, "code": code})
    assert done.status_code == 200 and "Phone number confirmed" in done.get_data(as_text=True)
    assert db.one("SELECT verified_channel, confirm_failures FROM verifications WHERE id = :id", id=vid) == {
        "verified_channel": "sms",
        "confirm_failures": 1,
    }


def test_an_sms_the_link_cancelled_never_proves_and_the_page_no_longer_asks_for_it(targets, db):
    create, confirm = targets
    handle, vid = _email_then_sms(create)
    assert confirm.post("/", json={"token": link_token(db, vid)}).status_code == 200  # the address first
    shown = confirm.get("/?entry=" + handle)
    page = shown.get_data(as_text=True)
    assert shown.status_code == 410 and "This code has expired" in page and "Enter your code" not in page
    posted = confirm.post("/", data={"entry": handle, "code": sms_code(db, vid)})
    assert posted.status_code == 410 and "Phone number confirmed" not in posted.get_data(as_text=True)
    by_api = confirm.post("/", json={"verification_id": str(vid), "code": sms_code(db, vid)})
    assert by_api.status_code == 410 and by_api.get_json()["type"].endswith("/verification-finished")
    state = db.one("SELECT second_proof_at, confirm_failures FROM verifications WHERE id = :id", id=vid)
    assert state == {"second_proof_at": None, "confirm_failures": 2}  # each counted as a wrong code


def test_wrong_codes_count_against_the_same_limit_and_end_locked(targets, db):
    create, confirm = targets
    created = _create(create)
    handle, vid = _entry(created["code_entry_url"]), uuid.UUID(created["verification_id"])
    right = sms_code(db, vid)
    wrong = f"{(int(right) + 1) % 10**6:06d}"
    first = confirm.post("/", data={"entry": handle, "code": wrong})
    page = first.get_data(as_text=True)
    assert first.status_code == 422 and "You can try 4 more times" in page and 'aria-invalid="true"' in page
    assert _form(page) == {"entry": handle} and wrong not in page  # the code typed is never written back
    assert confirm.post("/", json={"verification_id": str(vid), "code": wrong}).get_json()["remaining_attempts"] == 3
    for _ in range(2):
        confirm.post("/", data={"entry": handle, "code": wrong})
    last = confirm.post("/", data={"entry": handle, "code": wrong})
    assert last.status_code == 410 and "This confirmation is locked" in last.get_data(as_text=True)
    assert confirm.post("/", data={"entry": handle, "code": right}).status_code == 410
    assert db.one("SELECT status FROM verifications WHERE id = :id", id=vid)["status"] == "locked"


def test_a_code_of_the_wrong_shape_shows_the_form_again_uncounted(targets, db):
    create, confirm = targets
    created = _create(create)
    handle = _entry(created["code_entry_url"])
    for typed in ("12345", "abcdef", ""):
        again = confirm.post("/", data={"entry": handle, "code": typed})
        assert again.status_code == 400 and "Enter the 6-digit code" in again.get_data(as_text=True)
    failures = db.one(
        "SELECT confirm_failures FROM verifications WHERE id = :id", id=uuid.UUID(created["verification_id"])
    )
    assert failures["confirm_failures"] == 0


def test_no_handle_but_the_keys_opens_the_page(targets, db):
    create, confirm = targets
    created = _create(create)
    handle, vid = _entry(created["code_entry_url"]), uuid.UUID(created["verification_id"])
    code = sms_code(db, vid)
    other = Keyring.parse("other:" + "A" * 43)
    forged = [
        handle[:22],  # the verification id alone (the site's, the webhooks')
        handle[:22] + "A" * 22,
        other.primary.code_entry_handle(vid),  # made with another key
        handle[:-1] + ("A" if handle[-1] != "A" else "B"),
        handle + "A",
        str(vid),
    ]
    for entry in forged:
        shown = confirm.get("/?entry=" + entry)
        assert shown.status_code == 404 and "This page is not valid" in shown.get_data(as_text=True), entry
        assert confirm.post("/", data={"entry": entry, "code": code}).status_code == 404
    assert db.one("SELECT status, confirm_failures FROM verifications WHERE id = :id", id=vid) == {
        "status": "pending",
        "confirm_failures": 0,
    }


def test_the_page_says_how_a_verification_ended_in_the_words_of_a_code(targets, db):
    create, confirm = targets
    created = _create(create)
    handle, vid = _entry(created["code_entry_url"]), uuid.UUID(created["verification_id"])
    db.run(
        "UPDATE verifications SET created_at = now() - interval '1 hour', expires_at = now() - interval '1 s'"
        " WHERE id = :id",
        id=vid,
    )
    expired = confirm.get("/?entry=" + handle)
    assert expired.status_code == 410 and "This code has expired" in expired.get_data(as_text=True)
    posted = confirm.post("/", data={"entry": handle, "code": sms_code(db, vid)})
    assert posted.status_code == 410 and "This code has expired" in posted.get_data(as_text=True)


def test_a_handle_made_before_a_key_rotation_still_opens_the_page(configured_app, db):
    old = KEYRING.primary
    rotated = f"new:{'B' * 43},{TEST_TOKEN_KEYS}"
    create = configured_app("create_verification", VERIFY_LINK_BASE=BASE)
    created = _create(create)
    confirm = configured_app("confirm_verification", VERIFY_LINK_BASE=BASE, TOKEN_KEYS=rotated)
    assert _entry(created["code_entry_url"]) == old.code_entry_handle(uuid.UUID(created["verification_id"]))
    assert confirm.get("/?entry=" + _entry(created["code_entry_url"])).status_code == 200


def test_database_down_offers_the_form_again_and_never_writes_the_code_back(app_client, service_env, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    runtime.reset()
    handle = KEYRING.primary.code_entry_handle(uuid.uuid4())
    answer = app_client("confirm_verification").post("/", data={"entry": handle, "code": "123456"})
    page = answer.get_data(as_text=True)
    assert answer.status_code == 503 and '<form method="get">' in page and f'value="{handle}"' in page
    assert "123456" not in page and "enter the code again" in page
