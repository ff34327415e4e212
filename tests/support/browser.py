"""The pages in a real browser, for the end-to-end tests (tests/system/test_e2e_browser.py,
test_e2e_accessibility.py): headless Debian Chromium (/usr/bin/chromium, or CHROMIUM_PATH) driven by
Playwright, never a downloaded browser, and `verifyctl dev` serving the pages. A missing browser or
package skips locally and fails under CI=true (.ci/run installs them).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from support.dev_process import DevProcess
from support.paths import TEST_TOKEN_KEYS
from support.signup_requests import created_json, signup_body

CHROMIUM = Path(os.environ.get("CHROMIUM_PATH") or "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PHONE = {"width": 390, "height": 844}


def missing(message: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(message + " (CI must run the browser test: .ci/run installs chromium)")
    pytest.skip(message)


@contextmanager
def dev_server(database_url: str, local_dir: Path) -> Iterator[DevProcess]:
    """`verifyctl dev` on the scheduler's 1 s tick; it must stop cleanly on Ctrl-C."""
    env = {
        "DATABASE_URL": database_url,
        "TOKEN_KEYS": TEST_TOKEN_KEYS,
        "VERIFY_LOCAL_DIR": str(local_dir),
        "PRODUCT_NAME": "Example Shop",
        "RATE_LIMIT_PREFIX_PER_HOUR": "1000",  # the SMS pages' numbers share a prefix (docs/integrate.md: a suite's limits)
    }
    with DevProcess(env, "--schedule-seconds", "1") as process:
        yield process
        assert process.interrupt() == 0


@contextmanager
def chromium() -> Iterator:
    if not CHROMIUM.exists():
        missing(f"{CHROMIUM} is not installed (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("the playwright package is not installed (pip install -e '.[test]')")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def create_with(dev: DevProcess, **body) -> dict:
    return created_json(dev.create_url, signup_body(**body))
