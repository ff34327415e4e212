"""docs/integrate.md as a new user follows it: the dev server started with WEBHOOK_URL pointed at
their site, the Flask site and the Node site copied from the guide as written, each run on the port
the webhooks go to. A sign-up through the site creates (with a return_url), the email's link is
confirmed, and the site marks the address verified from the signed webhook, reading
verified_channel; a sandbox address that bounces reaches the site as delivery.failed with the
words the guide says to show; `verifyctl webhooks test` reaches the site and it answers 2xx."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest
import requests

from support.dev_process import DevProcess, free_ports
from support.markdown import block_starting
from support.paths import ROOT, TEST_TOKEN_KEYS

pytestmark = pytest.mark.slow

GUIDE = ROOT / "docs" / "integrate.md"
CLIENT = ROOT / "clients" / "typescript"


@pytest.fixture(scope="module")
def site_port() -> int:
    return free_ports()["base"]


@pytest.fixture(scope="module")
def dev(module_database_url, tmp_path_factory, site_port):
    env = {
        "DATABASE_URL": module_database_url,
        "TOKEN_KEYS": TEST_TOKEN_KEYS,
        "VERIFY_LOCAL_DIR": str(tmp_path_factory.mktemp("guide-local")),
        "WEBHOOK_URL": f"http://localhost:{site_port}/webhooks",  # the guide's one setting
        "WEBHOOK_SECRET": "",
        "RETURN_URL_ALLOWED_ORIGINS": "",
    }
    with DevProcess(env, "--fast", "--report-delay", "0.5") as process:
        yield process


def _secret(dev: DevProcess) -> str:
    return (Path(dev._env["VERIFY_LOCAL_DIR"]) / "dev-webhook-secret").read_text().strip()  # as the guide reads it


def _serve(argv: list[str], port: int, dev: DevProcess, cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "PORT": str(port), "WEBHOOK_SECRET": _secret(dev), "VERIFY_CREATE_URL": dev.create_url,
           "SITE_ORIGIN": f"http://localhost:{port}"}  # fmt: skip
    site = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while True:
        try:
            requests.get(f"http://localhost:{port}/welcome", timeout=2)
            return site
        except requests.ConnectionError:
            assert site.poll() is None and time.monotonic() < deadline, site.stdout and site.stdout.read()
            time.sleep(0.2)


def _stop(site: subprocess.Popen) -> None:
    site.terminate()
    site.wait(timeout=30)


def _until(check, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while (found := check()) is None:
        assert time.monotonic() < deadline, what
        time.sleep(0.25)
    return found


def _walk(dev: DevProcess, port: int, tag: str) -> None:
    site = f"http://localhost:{port}"
    address = f"ada@{tag}.example.com"  # a fresh domain per walk: the +tags of one mailbox share its allowance
    signed_up = requests.post(site + "/signup", json={"email": address}, timeout=30)
    assert signed_up.status_code == 201, signed_up.text
    account = signed_up.json()["account_id"]

    def message():
        found = [m for m in requests.get(dev.mailbox_url + "/api/messages", timeout=10).json() if m["to"] == [address]]
        return found[0] if found else None

    email = _until(message, f"no email to {address}:\n" + "\n".join(dev.lines[-20:]))
    link = next(u for u in email["links"] if "token=" in u)
    token = urllib.parse.parse_qs(urllib.parse.urlsplit(link).query)["token"][0]
    confirmed = requests.post(dev.confirm_url, json={"token": token}, timeout=30)  # the page's Confirm button
    assert confirmed.status_code == 200 and confirmed.json()["verified_channel"] == "email"

    def verified():
        shown = requests.get(f"{site}/accounts/{account}", timeout=10).json()
        return shown if shown["email_verified"] else None

    shown = _until(verified, "the site never heard verification.verified")
    assert shown["phone_verified"] is False and shown["verification_id"] == signed_up.json()["verification_id"]

    bounced = requests.post(site + "/signup", json={"email": f"bounce@{tag}.example.com"}, timeout=30).json()

    def problem():
        return requests.get(f"{site}/accounts/{bounced['account_id']}", timeout=10).json()["problem"]

    assert _until(problem, "the site never heard delivery.failed") == (
        "That address does not exist: check it, or use another."
    )

    probe = subprocess.run([sys.executable, "-m", "signup_verification.cli", "--json", "webhooks", "test"],
                           env={**dev._env, "DATABASE_URL": ""}, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert probe.returncode == 0, probe.stdout + probe.stderr
    assert json.loads(probe.stdout)["url"] == f"http://localhost:{port}/webhooks"


def test_the_banner_says_where_the_webhooks_go(dev, site_port):
    output = "\n".join(dev.lines)
    assert f"http://localhost:{site_port}/webhooks <- WEBHOOK_URL" in output
    assert f"return_url origins     http://localhost:{site_port} <- RETURN_URL_ALLOWED_ORIGINS" in output
    assert "sign up here" not in output  # the demo site's link: not while the webhooks go to your site


def test_the_flask_site_from_the_guide(dev, site_port, tmp_path):
    (tmp_path / "site.py").write_text(block_starting(GUIDE, "# site.py:"))
    site = _serve([sys.executable, "site.py"], site_port, dev, tmp_path)
    try:
        _walk(dev, site_port, "flask")
    finally:
        _stop(site)


def test_the_node_site_from_the_guide(dev, site_port, tmp_path):
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None or not (CLIENT / "node_modules").is_dir():
        message = "the Node site needs node, npm and clients/typescript/node_modules (npm ci there)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    tsc = CLIENT / "node_modules" / ".bin" / "tsc"
    built = subprocess.run([str(tsc), "-p", "tsconfig.json"], cwd=CLIENT, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    # The site's own package, with the client installed as `npm install <the package>` would (a link here).
    (tmp_path / "package.json").write_text(json.dumps({"name": "guide-site", "private": True, "type": "module"}))
    modules = tmp_path / "node_modules"
    (modules / "@types").mkdir(parents=True)
    (modules / "signup-verification-client").symlink_to(CLIENT)
    (modules / "@types" / "node").symlink_to(CLIENT / "node_modules" / "@types" / "node")
    (tmp_path / "site.ts").write_text(block_starting(GUIDE, "// site.ts:"))
    options = ["--strict", "--target", "es2022", "--module", "nodenext", "--moduleResolution", "nodenext",
               "--types", "node", "--outDir", "out", "site.ts"]  # fmt: skip
    compiled = subprocess.run([str(tsc), *options], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    site = _serve([node, "out/site.js"], site_port, dev, tmp_path)
    try:
        _walk(dev, site_port, "node")
    finally:
        _stop(site)
