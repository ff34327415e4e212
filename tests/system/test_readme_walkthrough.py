"""The README's "Try it" walkthrough, run as written: `dev.py run --fast` (here on free ports, the
README's rewritten to them), its curl commands through bash, the mailbox, the link and Confirm, then
its verifyctl commands from the checkout, each claim of its comments checked."""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.parse

import pytest
import requests

from support.dev_process import DevProcess
from support.markdown import code_blocks, section
from support.paths import ROOT, TEST_TOKEN_KEYS

pytestmark = pytest.mark.slow

WALKTHROUGH = section(ROOT / "README.md", "## Two commands (a fresh machine with nothing but Python ≥ 3.11)")


def _blocks() -> tuple[str, str]:
    found = [body for info, body in code_blocks(WALKTHROUGH) if info == "sh"]
    curls = next(b for b in found if b.startswith("curl "))
    verifyctl = next(b for b in found if b.startswith(".venv/bin/verifyctl "))
    return curls, verifyctl


def _commands(block: str) -> list[str]:
    """Each command of a block: from a line that starts one to the next comment or command."""
    commands: list[list[str]] = []
    for line in block.splitlines():
        if line.startswith(("curl ", ".venv/")):
            commands.append([line])
        elif line.startswith("#"):
            commands.append([])
        elif commands and commands[-1]:
            commands[-1].append(line)
    return ["\n".join(c) for c in commands if c]


def _bash(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def _answer(output: str) -> tuple[int, dict[str, str], str]:
    head, _, body = output.replace("\r\n", "\n").partition("\n\n")
    status = int(head.split()[1])
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in head.splitlines()[1:])}
    return status, headers, body


@pytest.fixture(scope="module")
def dev(module_database_url, tmp_path_factory):
    env = {"DATABASE_URL": module_database_url, "TOKEN_KEYS": TEST_TOKEN_KEYS,
           "VERIFY_LOCAL_DIR": str(tmp_path_factory.mktemp("readme-local"))}  # fmt: skip
    assert "python3 dev.py run --fast" in WALKTHROUGH
    with DevProcess(env, "--fast") as process:  # what `dev.py run --fast` runs: verifyctl dev --fast
        yield process


def test_the_walkthrough_as_written(dev):
    curls, verifyctl = _blocks()
    ports = {"localhost:8081": f"localhost:{dev.ports['base']}", "localhost:8090": f"localhost:{dev.ports['mailbox']}"}
    env = {**dev._env, "DATABASE_URL": ""}  # the commands find the running dev server, as in a second terminal
    first, second = _commands(re.sub("|".join(ports), lambda m: ports[m.group(0)], curls))

    status, headers, body = _answer(_bash(first, env).stdout)
    assert status == 201 and '"status":"pending"' in body.replace(" ", ""), body
    created = json.loads(body)
    status, headers, replayed = _answer(_bash(first, env).stdout)  # "the same command again replays it"
    assert status == 201 and headers.get("idempotent-replayed") == "true" and replayed == body
    other = requests.post(dev.create_url, headers={"Idempotency-Key": "signup-42"}, timeout=30,
                          json={"account_id": "acct_42", "channel": "email", "destination": "eve@example.com"})  # fmt: skip
    assert other.status_code == 422  # "the same key with another body answers 422"
    status, _, body = _answer(_bash(second, env).stdout)
    assert status == 201, body  # not 429: another address
    assert json.loads(body)["fallback"]["after_seconds"] == 30

    deadline = time.monotonic() + 10  # "within 2 s both emails are in the mailbox" (a tick is 2 s)
    while len(messages := requests.get(dev.mailbox_url + "/api/messages", timeout=10).json()) < 2:
        assert time.monotonic() < deadline, "\n".join(dev.lines[-20:])
        time.sleep(0.2)
    assert {m["to"][0] for m in messages} == {"ada@example.com", "grace@example.com"}
    [ada] = [m for m in messages if m["to"] == ["ada@example.com"]]
    link = next(u for u in ada["links"] if "token=" in u)
    assert requests.get(link, timeout=30).status_code == 200  # its page, with the Confirm button
    token = urllib.parse.parse_qs(urllib.parse.urlsplit(link).query)["token"][0]
    pressed = requests.post(dev.confirm_url, data={"token": token}, timeout=30)
    assert pressed.status_code == 200 and "confirmed" in pressed.text

    for command in _commands(verifyctl.replace("<verification_id>", created["verification_id"])):
        done = _bash(command, env)
        assert done.returncode == 0, (command, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr
        if " inspect " in command:
            assert "verified" in done.stdout and "ada@example.com" not in done.stdout
        if command.split()[1] == "dispatch":
            assert "sending through the running `verifyctl dev`" in done.stderr
            assert done.stdout.startswith("dispatch: ") and done.stdout.count("\n") == 1  # a line, not JSON
