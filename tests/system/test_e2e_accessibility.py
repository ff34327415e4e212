"""Every page the person sees passes axe-core (WCAG rules), in the light and the dark colour scheme and
in every locale: the link's pages (confirm, confirmed, already, expired, locked, replaced, not valid,
unavailable) and the code-entry page with every page it ends on, each in a real browser against
`verifyctl dev` (tests/support/browser.py), each page distinct and in the locale asked for.

axe-core's engine comes pinned through PyPI (axe-playwright-python ships axe.min.js).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import requests

from signup_verification.platform.database import Database
from signup_verification.verifications.tokens import Keyring
from support.browser import PHONE, chromium, create_with, dev_server, missing
from support.paths import TEST_TOKEN_KEYS

pytestmark = pytest.mark.slow


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


def _axe_script() -> str:
    """axe-core's engine, pinned through PyPI (axe-playwright-python ships axe.min.js)."""
    try:
        import axe_playwright_python
    except ImportError:
        missing("axe-playwright-python is not installed (pip install -e '.[test]')")
    return (Path(axe_playwright_python.__file__).parent / "axe.min.js").read_text(encoding="utf-8")


def _axe_violations(page, axe_script: str) -> list[str]:
    """Every axe violation on the loaded page, in the light and the dark scheme."""
    found = []
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        if not page.evaluate("typeof window.axe !== 'undefined'"):
            page.evaluate(axe_script)
        result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
        for violation in result["violations"]:
            targets = [" ".join(node["target"]) for node in violation["nodes"]]
            found.append(f"{page.url.split('?')[0]} [{scheme}] {violation['id']}: {violation['help']} at {targets}")
    return found


class _AxeWalk:
    """A phone-sized page in one locale that checks each page it is shown: its language, its heading
    (`seen`, by name: the pages must be distinct) and axe's violations in both colour schemes."""

    def __init__(self, browser, locale: str):
        self.locale, self.axe_script = locale, _axe_script()
        self.context = browser.new_context(viewport=PHONE, extra_http_headers={"Accept-Language": locale})
        self.page = self.context.new_page()
        self.page.set_default_timeout(15_000)
        self.seen: dict[str, str] = {}
        self.violations: list[str] = []

    def check(self, name: str, status: int | None, url: str | None = None) -> None:
        if url is not None:
            response = self.page.goto(url)
            assert response.status == status, name
        assert self.page.evaluate("document.documentElement.lang") == self.locale, name
        alert = " (alert)" if self.page.get_by_role("alert").count() else ""
        self.seen[name] = self.page.get_by_role("heading", level=1).inner_text() + alert
        self.violations.extend(_axe_violations(self.page, self.axe_script))

    def assert_clean(self, pages: int) -> None:
        assert len(set(self.seen.values())) == len(self.seen) == pages, self.seen  # that many distinct pages
        assert self.violations == [], "\n".join(self.violations)


@pytest.mark.parametrize("locale", ["en", "ja"])
def test_every_page_passes_axe_in_both_colour_schemes(dev, browser, e2e_db, locale):
    from signup_verification.api import pages as page_renderer

    keyring = Keyring.parse(TEST_TOKEN_KEYS)

    def new_link(account: str | None = None) -> tuple[str, str]:
        response = requests.post(
            dev.create_url,
            timeout=30,
            headers={"Idempotency-Key": uuid.uuid4().hex},
            json={
                "account_id": account or f"acct_{uuid.uuid4().hex[:8]}",
                "channel": "email",
                "destination": f"{uuid.uuid4().hex[:8]}@example.com",
                "locale": locale,
                "return_url": dev.site_url + "/",  # the Continue / back links are on the pages checked
            },
        )
        assert response.status_code == 201, response.text
        verification_id = response.json()["verification_id"]
        row = e2e_db.one("SELECT key_id, token_nonce FROM verifications WHERE id = :id", id=uuid.UUID(verification_id))
        token = keyring.get(row["key_id"]).link(uuid.UUID(verification_id), bytes(row["token_nonce"]))
        return verification_id, f"{dev.confirm_url}?token={token}"

    def set_status(verification_id: str, sql: str) -> None:
        e2e_db.run(f"UPDATE verifications SET {sql} WHERE id = :id", id=uuid.UUID(verification_id))

    walk = _AxeWalk(browser, locale)
    check, page = walk.check, walk.page
    try:
        _, link = new_link()
        check("confirm", 200, link)
        page.get_by_role("button").click()
        page.wait_for_load_state()
        check("verified", None)
        check("already", 200, link)
        expired, link = new_link()
        set_status(expired, "created_at = now() - interval '1 hour', expires_at = now() - interval '1 s'")
        check("expired", 410, link)
        locked, link = new_link()
        set_status(locked, "status = 'locked', updated_at = now()")
        check("locked", 410, link)
        account = f"acct_{uuid.uuid4().hex[:8]}"
        _, old = new_link(account)
        new_link(account)
        check("superseded", 410, old)
        check("invalid", 404, f"{dev.confirm_url}?token={'A' * 43}")
        # The database cannot be stopped under the shared dev server: the unavailable page as the
        # endpoint renders it (same headers, same CSP), served at a local address.
        html, status, headers = page_renderer.render(
            "unavailable.html", 503, {"Retry-After": "5"}, locale=locale, field="token", value="A" * 43, method="post"
        )
        page.route(
            "http://localhost:1/unavailable", lambda route: route.fulfill(status=status, headers=headers, body=html)
        )
        check("unavailable", 503, "http://localhost:1/unavailable")
    finally:
        walk.context.close()
    walk.assert_clean(pages=8)


@pytest.mark.parametrize("locale", ["en", "ja"])
def test_every_code_entry_page_passes_axe_in_both_colour_schemes(dev, browser, e2e_db, locale):
    """The code-entry page and every page it ends on, with the code's words: the form, the form after a
    wrong code, confirmed, already, expired, locked, replaced and not valid."""
    keyring = Keyring.parse(TEST_TOKEN_KEYS)

    def new_page_url(account: str | None = None, phone: str | None = None) -> tuple[str, str]:
        n = uuid.uuid4().int  # an exchange of its own too: RATE_LIMIT_PREFIX_PER_HOUR counts per number prefix
        created = create_with(
            dev, account_id=account or f"acct_{uuid.uuid4().hex[:8]}", channel="sms", locale=locale,
            destination=phone or f"+1415{200 + n % 800:03d}{n // 800 % 10_000:04d}", return_url=dev.site_url + "/",
        )  # fmt: skip
        return created["verification_id"], created["code_entry_url"]

    def code_of(verification_id: str) -> str:
        row = e2e_db.one("SELECT key_id, token_nonce FROM verifications WHERE id = :id", id=uuid.UUID(verification_id))
        return keyring.get(row["key_id"]).sms_code(uuid.UUID(verification_id), bytes(row["token_nonce"]), 6)

    walk = _AxeWalk(browser, locale)
    check, page = walk.check, walk.page

    def submit(code: str) -> None:
        page.locator("#code").fill(code)
        page.locator("button").click()
        page.wait_for_load_state()

    try:
        verification_id, url = new_page_url()
        check("form", 200, url)
        code = code_of(verification_id)
        submit(str((int(code) + 1) % 10**6).zfill(6))
        check("wrong", None)
        submit(code)
        check("verified", None)
        check("already", 200, url)
        expired, url = new_page_url()
        e2e_db.run(
            "UPDATE verifications SET created_at = now() - interval '1 hour', expires_at = now() - interval '1 s'"
            " WHERE id = :id",
            id=uuid.UUID(expired),
        )
        check("expired", 410, url)
        locked, url = new_page_url()
        e2e_db.run(
            "UPDATE verifications SET status = 'locked', updated_at = now() WHERE id = :id", id=uuid.UUID(locked)
        )
        check("locked", 410, url)
        account = f"acct_{uuid.uuid4().hex[:8]}"
        _, old = new_page_url(account)
        new_page_url(account)
        check("superseded", 410, old)
        check("invalid", 404, f"{dev.confirm_url}?entry={'A' * 44}")
    finally:
        walk.context.close()
    walk.assert_clean(pages=8)
