"""docs/integrate.md as a new user follows it: the dev server started with WEBHOOK_URL pointed at
their site, the Flask site and the Node site copied from the guide as written, each run on the port
the webhooks go to. The Node site is set up by the guide's own steps in an empty directory: `npm
init`, ESM, the client's packed tarball and the current TypeScript and Node types from the registry,
the guide's tsconfig.json, `npx tsc`.

Through each site: a sign-up with an SMS fallback whose code is typed on the service's code-entry
page (code_entry_url), which ends on the confirmed page whose Continue goes back to the site, and the
site has the number proved and stored while the address is not; the email's link then proves the
address (its page offers to confirm it: it was not confirmed yet), and the site hears it from the
signed webhook; a second sign-up's code goes through the site's own form and the client's confirm;
a sandbox address that bounces reaches the site as delivery.failed with the words the guide says to
show; `verifyctl webhooks test` reaches the site and it answers 2xx.

Cost: the Node site's npm steps take ~6 s with npm's cache warm (the tarball is packed once per
session, shared with the TypeScript client's tests); each walk waits for two SMS fallbacks of
SMS_FALLBACK_SECONDS=2."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest
import requests

from support.dev_process import DevProcess, free_ports
from support.markdown import block_starting, code_blocks
from support.paths import ROOT, TEST_TOKEN_KEYS
from support.typescript_client import npm

pytestmark = pytest.mark.slow

GUIDE = ROOT / "docs" / "integrate.md"


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
           "VERIFY_CONFIRM_URL": dev.confirm_url, "SITE_ORIGIN": f"http://localhost:{port}",
           "SMS_FALLBACK_SECONDS": "2"}  # fmt: skip
    site = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while True:
        try:
            requests.get(f"http://localhost:{port}/accounts/none", timeout=2)  # any answer: it is serving
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


def _message(dev: DevProcess, to: str) -> dict:
    def found():
        messages = [m for m in requests.get(dev.mailbox_url + "/api/messages", timeout=10).json() if m["to"] == [to]]
        return messages[0] if messages else None

    return _until(found, f"nothing reached {to}:\n" + "\n".join(dev.lines[-20:]))


def _code(dev: DevProcess, phone: str) -> str:
    sms = _message(dev, phone)
    *_, last = sms["text"].rstrip().split("\n")
    origin = re.fullmatch(r"@localhost #(\d{6})", last)  # the origin-bound line, the confirm target's host
    assert origin, sms["text"]
    return origin.group(1)


def _walk(dev: DevProcess, port: int, tag: str, phones: tuple[str, str]) -> None:
    site = f"http://localhost:{port}"

    def account_of(account_id: str) -> dict:
        return requests.get(f"{site}/accounts/{account_id}", timeout=10).json()

    # 1. An SMS-fallback sign-up; the code typed on the service's page (code_entry_url).
    address = f"ada@{tag}.example.com"  # a fresh domain per walk: the +tags of one mailbox share its allowance
    signed_up = requests.post(site + "/signup", json={"email": address, "phone": phones[0]}, timeout=30)
    assert signed_up.status_code == 201, signed_up.text
    answer = signed_up.json()
    account = answer["account_id"]
    assert answer["code_entry_url"].startswith(dev.confirm_url + "?entry=")
    code = _code(dev, phones[0])  # the fallback went out: the link was not used
    page = requests.get(answer["code_entry_url"], timeout=30)
    assert page.status_code == 200 and 'autocomplete="one-time-code"' in page.text
    entry = re.search(r'name="entry" value="([^"]+)"', page.text).group(1)
    confirmed = requests.post(dev.confirm_url, data={"entry": entry, "code": code}, timeout=30)
    assert confirmed.status_code == 200 and "Phone number confirmed" in confirmed.text, confirmed.text
    back = re.search(r'<a class="button" href="([^"]+)"', confirmed.text).group(1)  # Continue to the site
    assert back == f"{site}/welcome/{account}"
    welcomed = requests.get(back, timeout=30).json()  # the site reads the proofs
    assert (welcomed["phone"], welcomed["phone_verified"], welcomed["email_verified"]) == (phones[0], True, False)

    # 2. The email's link: its page offers to confirm the address (not "already confirmed"), which proves it.
    link = next(u for u in _message(dev, address)["links"] if "token=" in u)
    shown = requests.get(link, timeout=30)
    assert shown.status_code == 200 and "Confirm email address" in shown.text and "Already" not in shown.text
    token = urllib.parse.parse_qs(urllib.parse.urlsplit(link).query)["token"][0]
    proved = requests.post(dev.confirm_url, json={"token": token}, timeout=30)  # the page's Confirm button
    assert proved.status_code == 200 and proved.json()["proof"]["channel"] == "email"
    assert [p["channel"] for p in proved.json()["proofs"]] == ["sms", "email"]

    def both_verified():
        shown = account_of(account)
        return shown if shown["email_verified"] else None

    shown = _until(both_verified, "the site never heard verification.proved for the address")
    assert shown["phone_verified"] is True and shown["verification_id"] == answer["verification_id"]

    # 3. A second sign-up: the code on the site's own form, through the client's confirm.
    second = requests.post(site + "/signup", json={"email": f"grace@{tag}.example.com", "phone": phones[1]}, timeout=30)
    assert second.status_code == 201, second.text
    other = second.json()["account_id"]
    code = _code(dev, phones[1])
    wrong = requests.post(
        site + "/code", json={"account_id": other, "code": f"{(int(code) + 1) % 10**6:06d}"}, timeout=30
    )
    assert wrong.status_code == 422 and wrong.json()["remaining_attempts"] == 4
    right = requests.post(site + "/code", json={"account_id": other, "code": code}, timeout=30)
    assert right.status_code == 200 and right.json()["phone_verified"] is True and right.json()["phone"] == phones[1]
    assert right.json()["email_verified"] is False

    # 4. A bounce reaches the site with the guide's words; the webhook check reaches it.
    bounced = requests.post(site + "/signup", json={"email": f"bounce@{tag}.example.com"}, timeout=30).json()

    def problem():
        return account_of(bounced["account_id"])["problem"]

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
        _walk(dev, site_port, "flask", ("+14155550171", "+14155550172"))
    finally:
        _stop(site)


def test_the_node_site_from_the_guide(dev, site_port, tmp_path, typescript_client_tarball):
    """The guide's steps in an empty directory, as written: `$REPO` is a checkout whose
    clients/typescript holds the packed client (the guide's `npm pack` writes it there)."""
    npm()  # node and npm, or a skip (a failure under CI=true)
    repo = tmp_path / "repo"
    (repo / "clients" / "typescript").mkdir(parents=True)
    (repo / "clients" / "typescript" / typescript_client_tarball.name).symlink_to(typescript_client_tarball)
    steps = block_starting(GUIDE, "mkdir my-site")
    env = {**os.environ, "REPO": str(repo), "npm_config_prefer_offline": "true", "npm_config_audit": "false",
           "npm_config_fund": "false", "npm_config_update_notifier": "false"}  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", steps], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    project = tmp_path / "my-site"
    [tsconfig] = [body for info, body in code_blocks(GUIDE.read_text()) if info == "json"]
    (project / "tsconfig.json").write_text(tsconfig)
    (project / "site.ts").write_text(block_starting(GUIDE, "// site.ts:"))
    compiled = subprocess.run(["npx", "tsc"], cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    print(f"the guide's npm steps and tsc: {time.monotonic() - started:.1f} s")
    site = _serve(["node", "dist/site.js"], site_port, dev, project)
    try:
        _walk(dev, site_port, "node", ("+14155550181", "+14155550182"))
    finally:
        _stop(site)
