"""`verifyctl dev`: one command starts everything, prints its URLs, and Ctrl-C leaves nothing behind."""

from __future__ import annotations

import argparse
import socket
import time
from pathlib import Path

import pytest
import requests

from signup_verification import cli
from signup_verification.cli.commands import dev as dev_command
from signup_verification.local import devserver
from support.dev_process import DevProcess, descendants, process_table
from support.paths import TEST_TOKEN_KEYS


def test_targets_are_discovered_from_main_py(tmp_path: Path):
    source = tmp_path / "main.py"
    source.write_text(
        "import functions_framework\n\n"
        "@functions_framework.http\n@endpoint\ndef create_verification(request): ...\n\n"
        "def helper(): ...\n\n"
        "@functions_framework.http\ndef status(request): ...\n\n"
        "@functions_framework.http\ndef new_thing(request): ...\n"
    )
    targets = devserver.discover_targets(source)
    assert targets == ["create_verification", "status", "new_thing"]
    assert devserver.assign_ports(targets, 9000) == {"create_verification": 9000, "status": 9004, "new_thing": 9005}


def test_the_real_main_py_has_the_confirm_target():
    assert {"create_verification", "confirm_verification"} <= set(devserver.discover_targets())


def test_children_get_the_mailbox_as_smtp_and_twilio_and_links_to_the_confirm_port():
    ports = {"create_verification": 9000, "confirm_verification": 9001}
    env = devserver.child_environment(
        {"SMTP_PASSWORD": "x", "PATH": "/bin"}, "postgresql://u@h/db", "127.0.0.1", ports, 9025, 9090
    )
    assert env["VERIFY_LINK_BASE"] == "http://localhost:9001/"
    assert (env["EMAIL_TRANSPORT"], env["SMTP_HOST"], env["SMTP_PORT"]) == ("smtp", "127.0.0.1", "9025")
    assert (env["SMS_TRANSPORT"], env["TWILIO_API_URL"]) == ("twilio", "http://127.0.0.1:9090")
    assert env["TWILIO_ACCOUNT_SID"].startswith("AC") and env["TWILIO_FROM"] and env["TWILIO_AUTH_TOKEN"]
    assert "SMTP_PASSWORD" not in env and env["DATABASE_URL"] == "postgresql://u@h/db"
    assert env["DISPATCH_FANOUT_URL"] == ""  # no dispatch target served: no fan-out
    with_dispatch = devserver.child_environment({}, "x", "127.0.0.1", {**ports, "dispatch": 9002}, 9025, 9090)
    assert with_dispatch["DISPATCH_FANOUT_URL"] == "http://127.0.0.1:9002/"  # its fan-out starts more of itself
    explicit = devserver.child_environment(
        {"VERIFY_LINK_BASE": "https://example.test/c"}, "x", "127.0.0.1", ports, 9025, 9090
    )
    assert explicit["VERIFY_LINK_BASE"] == "https://example.test/c"


def test_the_schedule_interval_has_a_flag_an_env_var_and_a_cloud_scheduler_default(monkeypatch):
    parser = argparse.ArgumentParser()
    dev_command.add_arguments(parser)
    monkeypatch.delenv("VERIFY_DEV_SCHEDULE_SECONDS", raising=False)
    assert devserver.schedule_seconds(parser.parse_args([])) == 60
    assert devserver.schedule_seconds(parser.parse_args(["--schedule-seconds", "1.5"])) == 1.5
    assert devserver.schedule_seconds(parser.parse_args(["--fast"])) == dev_command.FAST_INTERVAL_SECONDS
    assert devserver.schedule_seconds(parser.parse_args(["--no-scheduler"])) == 0
    monkeypatch.setenv("VERIFY_DEV_SCHEDULE_SECONDS", "3")
    assert devserver.schedule_seconds(parser.parse_args([])) == 3
    assert devserver.schedule_seconds(parser.parse_args(["--schedule-seconds", "1.5"])) == 1.5


def test_a_busy_port_is_a_clear_error_before_anything_starts(tmp_path, capsys, monkeypatch, pg_server):
    monkeypatch.setenv("VERIFY_LOCAL_DIR", str(tmp_path))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        status = cli.main(["dev", "--base-port", str(port), "--smtp-port", "0", "--mailbox-port", "0"])
    assert status == 1
    error = capsys.readouterr().err
    # The first port checked: a neighbouring port taken by some other process cannot answer first.
    assert f"port {port} (create_verification) is in use" in error and "--base-port" in error
    assert "--site-port" in error and error.count("\n") == 1
    assert not (tmp_path / "pg").exists()  # nothing was started
    # ...and nothing stopped: the test server this process runs is still up (CI once lost it here).
    pg_server.with_database("postgres").connect().close()


def _private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True)
    return path


@pytest.mark.slow
def test_a_port_taken_at_the_same_instant_is_the_same_one_line(tmp_path, capsys, monkeypatch, database_url):
    """Another program takes the confirm port between the check and the bind: gunicorn's five seconds
    of retry lines are held back, and nothing is left running. The other targets' servers open no
    control socket, so none of them adds its `Control server error: [Errno 98]` line."""
    import os

    from support.dev_process import free_ports

    found = free_ports()
    monkeypatch.setenv("VERIFY_LOCAL_DIR", str(tmp_path))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(_private_dir(tmp_path / "run")))  # where gunicorn's socket would go
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("TOKEN_KEYS", TEST_TOKEN_KEYS)
    taken = found["base"] + 1  # confirm_verification's
    checked = devserver.check_free
    monkeypatch.setattr(devserver, "check_free", lambda h, p, w: None if p == taken else checked(h, p, w))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", taken))
        busy.listen()
        argv = ["dev", "--base-port", str(found["base"]), "--smtp-port", str(found["smtp"]),
                "--mailbox-port", str(found["mailbox"]), "--site-port", str(found["site"])]  # fmt: skip
        status = cli.main(argv)
    out, err = capsys.readouterr()
    assert status == 1, out + err
    assert err == (
        f"verifyctl: port {taken} (confirm_verification) is in use: is another `verifyctl dev` running? "
        "Choose other ports with --base-port / --smtp-port / --mailbox-port / --site-port.\n"
    )
    assert "Ctrl-C stops everything." not in out  # it never said it was ready
    time.sleep(0.5)
    assert not descendants(os.getpid())


@pytest.mark.slow
def test_dev_serves_everything_and_ctrl_c_leaves_no_process_behind(tmp_path):
    local, runtime_dir = tmp_path / "local", _private_dir(tmp_path / "run")
    env = {"VERIFY_LOCAL_DIR": str(local), "DATABASE_URL": "", "TOKEN_KEYS": TEST_TOKEN_KEYS,
           "XDG_RUNTIME_DIR": str(runtime_dir)}  # fmt: skip
    dev = DevProcess(env, "--fast")
    with dev:
        output = "\n".join(dev.lines)
        assert "database ready" in output and str(local / "pg") in output
        # every function's gunicorn is up: none opened a control socket (they would all share this one)
        assert not (runtime_dir / "gunicorn.ctl").exists() and "Control server" not in output
        for target, offset in (("create_verification", 0), ("confirm_verification", 1)):
            assert f"{target:<22} {dev.url(offset)}" in output
        assert f"mailbox                {dev.mailbox_url}/" in output

        created = requests.post(
            dev.create_url,
            timeout=30,
            headers={"Idempotency-Key": "dev-1"},
            json={"account_id": "acct_dev", "channel": "email", "destination": "dev@example.com"},
        )
        assert created.status_code == 201, created.text
        page = requests.get(dev.confirm_url, params={"token": "A" * 43}, timeout=30)
        assert page.status_code == 404 and "This link is not valid" in page.text
        assert requests.get(dev.mailbox_url + "/", timeout=30).status_code == 200

        started = descendants(dev.process.pid)
        postgres = {pid for pid, (_, cmd) in process_table().items() if str(local / "pg") in cmd}
        assert len(started) >= 2 and postgres  # function servers (gunicorn master + worker each) and the database

        t0 = time.monotonic()
        assert dev.interrupt() == 0
        assert time.monotonic() - t0 < 30
        time.sleep(0.5)
        alive = set(process_table())
        assert not (started & alive), f"left behind: {[process_table().get(p) for p in started & alive]}"
        assert not {pid for pid, (_, cmd) in process_table().items() if str(local / "pg") in cmd}
        for port in (dev.ports["base"], dev.ports["base"] + 1, dev.ports["smtp"], dev.ports["mailbox"]):
            with pytest.raises(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
        assert any(line.startswith("stopping") for line in dev.lines)


@pytest.mark.slow
def test_sigint_inherited_as_ignored_still_stops_everything_and_the_button_works_without_a_scheduler(tmp_path):
    """Started as `verifyctl dev --no-scheduler &` would be (SIGINT ignored): the mailbox's Run
    dispatch now button still sends, a dispatch beside it finds the emulation, and SIGINT stops
    every process it started."""
    import json
    import subprocess
    import sys

    local = tmp_path / "local"
    env = {"VERIFY_LOCAL_DIR": str(local), "DATABASE_URL": "", "TOKEN_KEYS": TEST_TOKEN_KEYS}
    dev = DevProcess(env, "--no-scheduler", sigint_ignored=True)
    with dev:
        assert "<- on demand (mailbox button)" in "\n".join(dev.lines)
        assert "Run dispatch now" in requests.get(dev.mailbox_url + "/", timeout=30).text
        state = json.loads((local / "dev.json").read_text())
        assert state["environment"]["EMAIL_TRANSPORT"] == "smtp" and state["mailbox"] == dev.mailbox_url

        created = requests.post(
            dev.create_url,
            timeout=30,
            headers={"Idempotency-Key": "dev-button"},
            json={"account_id": "acct_b", "channel": "email", "destination": "b@example.com"},
        )
        assert created.status_code == 201, created.text
        pressed = requests.post(dev.mailbox_url + "/scheduler/run", timeout=30, allow_redirects=False)
        assert pressed.status_code == 303
        deadline = time.monotonic() + 30
        while not requests.get(dev.mailbox_url + "/api/messages", timeout=30).json():
            assert time.monotonic() < deadline, "\n".join(dev.lines)
            time.sleep(0.2)

        beside = subprocess.run(
            [sys.executable, "-m", "signup_verification.cli", "dispatch"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**dev._env, "DATABASE_URL": ""},
        )
        assert beside.returncode == 0 and "sending through the running `verifyctl dev`" in beside.stderr
        assert "Traceback" not in beside.stderr and "Warning" not in beside.stderr

        started = descendants(dev.process.pid)
        assert dev.interrupt() == 0
        time.sleep(0.5)
        assert not (started & set(process_table()))
        assert not {pid for pid, (_, cmd) in process_table().items() if str(local / "pg") in cmd}
        assert not (local / "dev.json").exists()
        output = "\n".join(dev.lines)
        assert "Traceback" not in output and "Warning" not in output and "XDG_RUNTIME_DIR" not in output
