"""Delivery reports as a new user tries them: `verifyctl dev` serves delivery_reports, the
mailbox reports an email delivered (`verifyctl inspect` beside it shows it) and bounces another,
after which a create to that address answers 422."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import requests

from support.dev_process import DevProcess
from support.paths import TEST_TOKEN_KEYS
from support.signup_requests import post_create, signup_body


def _message(dev: DevProcess, to: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        found = [m for m in requests.get(dev.mailbox_url + "/api/messages", timeout=30).json() if m["to"] == [to]]
        if found:
            return found[0]
        assert time.monotonic() < deadline, "\n".join(dev.lines)
        time.sleep(0.2)


def _state(dev: DevProcess, message_id: int, state: str, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        [m] = [m for m in requests.get(dev.mailbox_url + "/api/messages", timeout=30).json() if m["id"] == message_id]
        if m["delivery"] == state:
            return m
        assert time.monotonic() < deadline, (m, "\n".join(dev.lines))
        time.sleep(0.2)


def _create(dev: DevProcess, key: str, destination: str) -> requests.Response:
    return post_create(dev.create_url, signup_body(destination, account_id="acct_" + key), key)


@pytest.mark.slow
def test_dev_reports_delivered_and_bounce_this_refuses_the_address(tmp_path):
    local = tmp_path / "local"
    env = {
        "VERIFY_LOCAL_DIR": str(local),
        "DATABASE_URL": "",
        "TOKEN_KEYS": TEST_TOKEN_KEYS,
        "RATE_LIMIT_SPACING_SECONDS": "0",
    }
    with DevProcess(env, "--fast", "--report-delay", "60") as dev:
        assert f"delivery_reports       {dev.url(5)} <- the mailbox posts" in "\n".join(dev.lines)
        created = _create(dev, "rep-1", "ada@example.com")
        assert created.status_code == 201, created.text
        ada = _message(dev, "ada@example.com")
        assert ada["delivery"] == "sent"
        requests.post(f"{dev.mailbox_url}/messages/{ada['id']}/report", timeout=30)
        assert _state(dev, ada["id"], "delivered")["delivery_note"].endswith("delivered 1")

        inspect = subprocess.run(
            [sys.executable, "-m", "signup_verification.cli", "inspect", created.json()["verification_id"]],
            capture_output=True, text=True, timeout=60, env={**dev._env, "DATABASE_URL": ""},
        )  # fmt: skip
        assert inspect.returncode == 0, inspect.stderr
        assert "sendgrid says delivered" in inspect.stdout

        assert _create(dev, "rep-2", "bob@example.com").status_code == 201
        bob = _message(dev, "bob@example.com")
        requests.post(f"{dev.mailbox_url}/messages/{bob['id']}/bounce", timeout=30)
        assert "undeliverable 1" in _state(dev, bob["id"], "bounced")["delivery_note"]
        again = _create(dev, "rep-3", "bob@example.com")
        assert again.status_code == 422, again.text
        page = requests.get(f"{dev.mailbox_url}/messages/{bob['id']}", timeout=30).text
        assert ">bounced<" in page


def test_report_delay_is_a_number_of_seconds():
    import argparse

    from signup_verification.cli.commands import dev as dev_command

    parser = argparse.ArgumentParser()
    dev_command.add_arguments(parser)
    assert parser.parse_args([]).report_delay == 10.0
    assert parser.parse_args(["--report-delay", "0"]).report_delay == 0.0
    for bad in ("-1", "soon", "nan"):
        with pytest.raises(SystemExit):
            parser.parse_args(["--report-delay", bad])
