"""End to end in a real browser against `verifyctl dev`: create over HTTP, the scheduler emulation
dispatches, the mailbox shows the message, the person clicks the link and presses Confirm.

Headless Debian Chromium driven by Playwright (tests/support/browser.py); a missing browser skips
locally and fails under CI=true. SCREENSHOTS_DIR=docs/screenshots refreshes the README's screenshots.
(Every page through axe-core: test_e2e_accessibility.py.)
"""

from __future__ import annotations

import os
import re
import time
import uuid
from pathlib import Path

import pytest
import requests

from signup_verification.local import devserver
from signup_verification.platform.database import Database
from signup_verification.verifications.tokens import Keyring
from support.browser import PHONE, chromium, create_with, dev_server
from support.dev_process import DevProcess
from support.paths import TEST_TOKEN_KEYS
from support.signup_requests import created_json, signup_body

pytestmark = pytest.mark.slow

HAS_DISPATCH = "dispatch" in devserver.discover_targets()
needs_dispatch = pytest.mark.skipif(not HAS_DISPATCH, reason="the dispatch target is not in functions/main.py yet")


@pytest.fixture(scope="module")
def dev(module_database_url, tmp_path_factory):
    with dev_server(module_database_url, tmp_path_factory.mktemp("dev-local")) as process:
        yield process


@pytest.fixture(scope="module")
def e2e_db(module_database_url):
    database = Database.from_url(module_database_url)
    yield database
    database.close()


@pytest.fixture(scope="module")
def browser():
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser, dev):
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    page.set_default_timeout(15_000)
    outside: list[str] = []
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(("http://localhost", "data:")) else None)
    yield page
    context.close()
    assert outside == [], f"the pages loaded something from elsewhere: {outside}"


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    return Path(os.environ.get("SCREENSHOTS_DIR") or tmp_path_factory.mktemp("screenshots"))


def _shot(page, shots: Path, name: str) -> None:
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / f"{name}.png"), full_page=True)


def _create(dev: DevProcess, channel: str, destination: str) -> str:
    return created_json(dev.create_url, signup_body(destination, channel=channel))["verification_id"]


def _wait_for_message(dev: DevProcess, to: str, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for message in requests.get(dev.mailbox_url + "/api/messages", timeout=10).json():
            if to in message["to"]:
                return message
        time.sleep(0.25)
    raise AssertionError(f"nothing reached {to} in {timeout} s:\n" + "\n".join(dev.lines[-30:]))


def _status(db: Database, verification_id: str) -> str:
    return db.one("SELECT status FROM verifications WHERE id = :id", id=uuid.UUID(verification_id))["status"]


def _no_horizontal_scroll(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


@needs_dispatch
def test_email_link_from_the_mailbox_confirms_in_the_browser(dev, page, e2e_db, shots):
    verification_id = _create(dev, "email", "ada@example.com")
    message = _wait_for_message(dev, "ada@example.com")

    page.set_viewport_size({"width": 1000, "height": 700})
    page.goto(dev.mailbox_url + "/")
    page.get_by_role("link", name=re.compile("ada@example.com")).click()
    assert page.get_by_role("heading", name="Links in this message").is_visible()
    assert page.get_by_text(message["subject"]).is_visible()
    _shot(page, shots, "mailbox-message")
    heading = page.get_by_role("heading", level=1)

    page.set_viewport_size(PHONE)
    page.frame_locator("iframe").get_by_role("link", name="Confirm email address").click()
    page.wait_for_url(re.compile(re.escape(dev.confirm_url) + r"\?token="))
    assert heading.inner_text() == "Confirm your email address"
    assert page.get_by_text("a***@example.com").is_visible() and _no_horizontal_scroll(page)
    _shot(page, shots, "confirm")
    assert _status(e2e_db, verification_id) == "pending"  # opening the link changed nothing
    link = page.url
    assert link in message["links"]

    page.get_by_role("button", name="Confirm email address").click()
    page.wait_for_load_state()
    assert heading.inner_text() == "Email address confirmed"
    _shot(page, shots, "verified")
    assert _status(e2e_db, verification_id) == "verified"

    page.goto(link)
    assert heading.inner_text() == "Already confirmed"
    _shot(page, shots, "already-verified")


@needs_dispatch
def test_an_expired_link_shows_the_expired_page(dev, page, e2e_db, shots):
    verification_id = _create(dev, "email", "late@example.com")
    [link] = [u for u in _wait_for_message(dev, "late@example.com")["links"] if u.startswith(dev.confirm_url)]
    e2e_db.run(
        "UPDATE verifications SET created_at = now() - interval '1 hour', expires_at = now() - interval '1 s'"
        " WHERE id = :id",
        id=uuid.UUID(verification_id),
    )
    response = page.goto(link)
    assert response.status == 410
    assert page.get_by_role("heading", level=1).inner_text() == "This link has expired"
    assert page.get_by_role("button").count() == 0
    _shot(page, shots, "expired")


@needs_dispatch
def test_sms_code_flow_through_the_api(dev, page, e2e_db, shots):
    verification_id = _create(dev, "sms", "+14155550142")
    sms = _wait_for_message(dev, "+14155550142")
    code = re.search(r"\b(\d{6})\b", sms["text"]).group(1)
    page.set_viewport_size({"width": 1000, "height": 600})
    page.goto(dev.mailbox_url + "/")
    _shot(page, shots, "mailbox")  # email and SMS side by side, newest first
    page.get_by_role("link", name=re.compile(re.escape("+14155550142"))).click()
    assert page.get_by_text(code).count() >= 1
    _shot(page, shots, "mailbox-sms")

    wrong = str((int(code) + 1) % 10**6).zfill(6)
    refused = requests.post(dev.confirm_url, json={"verification_id": verification_id, "code": wrong}, timeout=30)
    assert refused.status_code == 422 and refused.json()["remaining_attempts"] == 4
    accepted = requests.post(dev.confirm_url, json={"verification_id": verification_id, "code": code}, timeout=30)
    assert accepted.status_code == 200 and accepted.json()["status"] == "verified"
    assert _status(e2e_db, verification_id) == "verified"


NARROW = {"width": 320, "height": 640}  # the narrowest phones in use


def _sms_code(dev: DevProcess, phone: str) -> str:
    return re.search(r"#(\d{6})$", _wait_for_message(dev, phone)["text"].rstrip()).group(1)  # the origin-bound line


@needs_dispatch
def test_the_code_entry_page_confirms_the_code_and_the_email_link_then_proves_the_address(dev, page, e2e_db, shots):
    """An email verification with an SMS fallback (both at once): the person types the SMS code on
    the service's page, which ends on "Phone number confirmed" with its way back; the email's link then
    offers to confirm the address (it was not), and confirming it proves it too."""
    created = create_with(
        dev, channel="email", destination="lin@example.com", return_url=dev.site_url + "/",
        fallback={"channel": "sms", "destination": "+14155550161", "after_seconds": 0},
    )  # fmt: skip
    code = _sms_code(dev, "+14155550161")
    heading = page.get_by_role("heading", level=1)
    page.goto(created["code_entry_url"])
    assert heading.inner_text() == "Enter your code" and page.get_by_text("+1******0161").is_visible()
    field = page.get_by_label("Code from the text message")
    assert field.get_attribute("autocomplete") == "one-time-code" and field.get_attribute("inputmode") == "numeric"
    assert page.evaluate("document.activeElement.id") == "code" and _no_horizontal_scroll(page)
    _shot(page, shots, "code-entry")
    field.fill(str((int(code) + 1) % 10**6).zfill(6))
    page.get_by_role("button", name="Confirm phone number").click()
    page.wait_for_load_state()
    assert page.get_by_role("alert").inner_text() == "That code is not right. You can try 4 more times."
    _shot(page, shots, "code-entry-wrong")
    page.get_by_label("Code from the text message").fill(f"{code[:3]} {code[3:]}")
    page.get_by_role("button", name="Confirm phone number").click()
    page.wait_for_load_state()
    assert heading.inner_text() == "Phone number confirmed" and page.get_by_text("+1******0161").is_visible()
    assert page.get_by_role("link", name=re.compile("Continue to")).get_attribute("href") == dev.site_url + "/"
    _shot(page, shots, "code-verified")
    link = next(u for u in _wait_for_message(dev, "lin@example.com")["links"] if u.startswith(dev.confirm_url))
    page.goto(link)
    assert heading.inner_text() == "Confirm your email address"  # never "Already confirmed": not proved yet
    page.get_by_role("button", name="Confirm email address").click()
    page.wait_for_load_state()
    assert heading.inner_text() == "Email address confirmed"
    proved = e2e_db.one(
        "SELECT verified_channel, second_proof_at IS NOT NULL AS both FROM verifications WHERE id = :id",
        id=uuid.UUID(created["verification_id"]),
    )
    assert proved == {"verified_channel": "sms", "both": True}


@needs_dispatch
@pytest.mark.parametrize(
    ("locale", "viewport", "name"), [("ja", PHONE, "code-entry-ja"), ("en", NARROW, "code-entry-narrow")]
)
def test_the_code_entry_page_in_japanese_and_on_a_narrow_screen(dev, browser, locale, viewport, name, shots):
    phone = "+14155550162" if locale == "ja" else "+14155550163"
    created = create_with(dev, channel="sms", destination=phone, locale=locale)
    code = _sms_code(dev, phone)
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    try:
        page.goto(created["code_entry_url"])
        assert page.evaluate("document.documentElement.lang") == locale and _no_horizontal_scroll(page)
        _shot(page, shots, name)
        page.locator("#code").fill(code)
        page.locator("button").click()
        page.wait_for_load_state()
        expected = "電話番号を確認しました" if locale == "ja" else "Phone number confirmed"
        assert page.get_by_role("heading", level=1).inner_text() == expected and _no_horizontal_scroll(page)
    finally:
        context.close()


def test_result_pages_in_the_browser_with_a_token_from_the_database(dev, page, e2e_db, shots):
    """Independent of the delivery worker: the token is derived from the row, as the worker does."""
    keyring = Keyring.parse(TEST_TOKEN_KEYS)

    def link_for(verification_id: str) -> str:
        row = e2e_db.one("SELECT key_id, token_nonce FROM verifications WHERE id = :id", id=uuid.UUID(verification_id))
        token = keyring.get(row["key_id"]).link(uuid.UUID(verification_id), bytes(row["token_nonce"]))
        return f"{dev.confirm_url}?token={token}"

    account = f"acct_{uuid.uuid4().hex[:8]}"
    first = requests.post(
        dev.create_url,
        timeout=30,
        headers={"Idempotency-Key": uuid.uuid4().hex},
        json={"account_id": account, "channel": "email", "destination": "old@example.com"},
    ).json()
    second = requests.post(
        dev.create_url,
        timeout=30,
        headers={"Idempotency-Key": uuid.uuid4().hex},
        json={"account_id": account, "channel": "email", "destination": "new@example.com"},
    ).json()
    heading = page.get_by_role("heading", level=1)

    assert page.goto(link_for(first["verification_id"])).status == 410
    assert heading.inner_text() == "A newer link was sent"
    _shot(page, shots, "superseded")

    page.goto(link_for(second["verification_id"]))
    assert heading.inner_text() == "Confirm your email address" and _no_horizontal_scroll(page)
    page.get_by_role("button", name="Confirm email address").click()
    page.wait_for_load_state()
    assert heading.inner_text() == "Email address confirmed"
    assert _status(e2e_db, second["verification_id"]) == "verified"
    page.go_back()  # back to the link: no-store, so it is asked again and tells the truth
    assert heading.inner_text() == "Already confirmed"

    assert page.goto(f"{dev.confirm_url}?token={'A' * 43}").status == 404
    assert heading.inner_text() == "This link is not valid"
    _shot(page, shots, "invalid")
