"""verifyctl run from a directory that is not its local dir's parent: it uses the one local dir of its
checkout (or, installed, of its user), says where its database is, never starts a second and empty
database there, and finds a running `verifyctl dev`: its database and its webhooks receiver."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from signup_verification import cli, runtime
from signup_verification.config import load
from signup_verification.local import devenv
from signup_verification.platform import config as platform_config
from support.fakes.webhooks import FakeWebhookReceiver
from support.paths import ROOT, TEST_TOKEN_KEYS

_UNSET = ("VERIFY_LOCAL_DIR", "DATABASE_URL", "WEBHOOK_URL", "WEBHOOK_SECRET", "EMAIL_TRANSPORT", "SMS_TRANSPORT")


@pytest.fixture
def elsewhere(monkeypatch, tmp_path):
    """As an installed package meets it: nothing set, an unrelated working directory, the local dir in
    the user's state directory (here under tmp_path)."""
    for name in _UNSET:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TOKEN_KEYS", TEST_TOKEN_KEYS)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr(platform_config, "source_checkout", lambda: None)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    runtime.reset()
    yield SimpleNamespace(local=tmp_path / "state" / "signup-verification", work=work)
    runtime.reset()


def test_the_local_dir_is_the_checkouts_or_the_users_whatever_the_working_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("VERIFY_LOCAL_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert load({}).local_dir == ROOT / ".local"  # dev.py's, from any directory
    monkeypatch.setattr(platform_config, "source_checkout", lambda: None)  # installed
    assert load({"XDG_STATE_HOME": str(tmp_path / "state")}).local_dir == tmp_path / "state" / "signup-verification"
    users = Path.home() / ".local" / "state" / "signup-verification"
    assert load({}).local_dir == users
    assert load({"XDG_STATE_HOME": "relative/state"}).local_dir == users  # invalid by the XDG spec: ignored

    def homeless() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", homeless)  # no HOME, no passwd entry: a container's arbitrary user
    assert load({}).local_dir == tmp_path / ".local"
    assert load({"VERIFY_LOCAL_DIR": str(tmp_path / "mine")}).local_dir == tmp_path / "mine"


def test_with_no_database_it_says_where_it_looked_and_starts_none(elsewhere, capsys):
    assert cli.main(["status"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("verifyctl: no database: DATABASE_URL is unset") and err.count("\n") == 1
    assert f"no `verifyctl dev` runs for {elsewhere.local}" in err and "`verifyctl migrate`" in err
    assert not (elsewhere.local / "pg").exists() and list(elsewhere.work.iterdir()) == []
    assert cli.main(["webhooks", "test"]) == 1
    err = capsys.readouterr().err
    assert f"WEBHOOK_URL is unset and no `verifyctl dev` runs for {elsewhere.local}" in err and err.count("\n") == 1


def test_beside_a_running_dev_it_uses_its_database_and_its_webhooks(elsewhere, database_url, capsys):
    with FakeWebhookReceiver() as receiver:
        dev_env = {"DATABASE_URL": database_url, "EMAIL_TRANSPORT": "smtp", "WEBHOOK_URL": receiver.endpoint,
                   "WEBHOOK_SECRET": ",".join(receiver.secrets)}  # fmt: skip
        devenv.publish(elsewhere.local, dev_env, "http://localhost:1")  # as `verifyctl dev` does, this pid
        try:
            assert cli.main(["webhooks", "test"]) == 0
            assert cli.main(["status"]) == 0
        finally:
            devenv.withdraw(elsewhere.local)
        [event] = receiver.events()
    out, err = capsys.readouterr()
    assert event["type"] == "webhook.test" and "HTTP 204" in out and "channel" in out
    note = f"verifyctl: using the `verifyctl dev` running for {elsewhere.local} (pid {os.getpid()})"
    assert err.count(note) == 2 and "starting" not in err
    assert list(elsewhere.work.iterdir()) == [] and not (elsewhere.local / "pg").exists()
