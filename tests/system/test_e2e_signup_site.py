"""Tried as a new user would, in a real browser against `verifyctl dev`: sign up on
the demo site -> the mailbox -> the link -> Confirm -> Continue -> back on the demo site, which shows
the account "verified" because the service's signed webhook arrived (not because it asked).

Headless Debian Chromium (/usr/bin/chromium) driven by Playwright, as tests/system/test_e2e_browser.py;
missing Chromium skips locally and fails under CI=true.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from pathlib import Path

import pytest
import requests

from signup_verification.platform.database import Database
from support.dev_process import DevProcess
from support.paths import TEST_TOKEN_KEYS

pytestmark = pytest.mark.slow

CHROMIUM = Path(os.environ.get("CHROMIUM_PATH") or "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking"]
PHONE = {"width": 390, "height": 844}


def _missing(message: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(message + " (CI must run the browser test: .ci/run installs chromium)")
    pytest.skip(message)


@pytest.fixture(scope="module")
def dev(module_database_url, tmp_path_factory):
    env = {
        "DATABASE_URL": module_database_url,
        "TOKEN_KEYS": TEST_TOKEN_KEYS,
        "VERIFY_LOCAL_DIR": str(tmp_path_factory.mktemp("site-local")),
        "PRODUCT_NAME": "Demo Shop",
    }
    for name in ("WEBHOOK_URL", "WEBHOOK_SECRET", "RETURN_URL_ALLOWED_ORIGINS"):
        env[name] = ""  # the emulation's own defaults: the demo site's endpoint, secret and origin
    with DevProcess(env, "--schedule-seconds", "1") as process:
        yield process
        assert process.interrupt() == 0


@pytest.fixture(scope="module")
def site_db(module_database_url):
    database = Database.from_url(module_database_url)
    yield database
    database.close()


@pytest.fixture
def page(dev):
    if not CHROMIUM.exists():
        _missing(f"{CHROMIUM} is not installed (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the playwright package is not installed (pip install -e '.[test]')")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport=PHONE)
        page = context.new_page()
        page.set_default_timeout(20_000)
        outside: list[str] = []
        page.on("request", lambda r: outside.append(r.url) if not r.url.startswith("http://localhost") else None)
        yield page
        context.close()
        browser.close()
        assert outside == [], f"the pages loaded something from elsewhere: {outside}"


def _shot(page, name: str) -> None:
    """SCREENSHOTS_DIR=docs/screenshots refreshes the README's pictures of the loop."""
    folder = os.environ.get("SCREENSHOTS_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def _wait_for_message(dev: DevProcess, to: str, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for message in requests.get(dev.mailbox_url + "/api/messages", timeout=10).json():
            if to in message["to"]:
                return message
        time.sleep(0.25)
    raise AssertionError(f"nothing reached {to} in {timeout} s:\n" + "\n".join(dev.lines[-30:]))


def test_the_demo_site_is_served_and_printed_with_the_others(dev):
    line = dev.wait_for_line("demo site", 5)
    assert dev.site_url in line and "/webhooks" in line
    assert requests.get(dev.site_url + "/", timeout=10).status_code == 200


def test_sign_up_mailbox_link_confirm_continue_and_the_webhook_says_verified(dev, page, site_db):
    email = f"ada.{uuid.uuid4().hex[:6]}@example.com"
    page.goto(dev.site_url + "/")
    page.get_by_label("Email").fill(email)
    _shot(page, "demo-signup")
    page.get_by_role("button", name="Sign up").click()
    page.wait_for_url(re.compile(re.escape(dev.site_url) + r"/accounts/demo-"))
    account_page = page.url
    assert page.locator("#account-status").inner_text() == "pending"

    _wait_for_message(dev, email)
    page.goto(dev.mailbox_url + "/")
    page.get_by_role("link", name=re.compile(re.escape(email))).click()
    page.frame_locator("iframe").get_by_role("link", name="Confirm email address").click()
    page.wait_for_url(re.compile(re.escape(dev.confirm_url) + r"\?token="))
    page.get_by_role("button", name="Confirm email address").click()
    page.wait_for_load_state()
    assert page.get_by_role("heading", level=1).inner_text() == "Email address confirmed"
    _shot(page, "verified-continue")

    page.get_by_role("link", name="Continue to Demo Shop").click()
    page.wait_for_url(account_page)  # the stored return_url: back on the site, on this account's page
    account_id = account_page.rsplit("/", 1)[1]
    row = site_db.one("SELECT status, return_url FROM verifications WHERE account_id = :a", a=account_id)
    assert row == {"status": "verified", "return_url": account_page}
    assert page.locator("#service-status").inner_text() == "verified"  # GET /<id> through the client
    # The page refreshes itself while pending; "verified" appears only once the signed webhook arrived.
    from playwright.sync_api import expect

    expect(page.locator("#account-status")).to_have_text("verified", timeout=60_000)  # retried across the refreshes
    _shot(page, "demo-verified")
    deadline = time.monotonic() + 30  # the proof's event is sent beside it, in either order
    while len(events := requests.get(f"{dev.site_url}/api/accounts/{account_id}", timeout=10).json()["events"]) < 2:
        assert time.monotonic() < deadline, events
        time.sleep(0.25)
    assert sorted(events) == ["verification.proved", "verification.verified"]
