"""verifyctl as an operator meets it, against the real (embedded) PostgreSQL: one-line errors that
name the cause and the next step, --version, --json and help on every subcommand, the exit status of
`status --check`, logging through the functions' configuration, and the emulation's transports."""

from __future__ import annotations

import base64
import json
import re
import socket
import uuid

import pytest

from signup_verification import cli
from signup_verification.local import devenv
from signup_verification.local.mailbox import MailboxServer
from support.factories import make_verifications
from support.paths import TEST_TOKEN_KEYS


def run(monkeypatch, capsys, env: dict[str, str], *argv: str) -> tuple[int, str, str]:
    for name in ("DATABASE_URL", "MIGRATIONS_DIR", "ENVIRONMENT", "EMAIL_TRANSPORT", "SMS_TRANSPORT", "LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(err: str) -> str:
    assert err.startswith("verifyctl: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed again when the block ends: nothing listens there


# -- one-line errors ----------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [["status"], ["dispatch"], ["inspect", str(uuid.uuid4())], ["reconcile"]])
def test_an_unmigrated_database_says_run_migrate(monkeypatch, capsys, tmp_path, empty_url, argv):
    env = {"DATABASE_URL": empty_url, "TOKEN_KEYS": TEST_TOKEN_KEYS, "VERIFY_LOCAL_DIR": str(tmp_path)}
    code, out, err = run(monkeypatch, capsys, env, *argv)
    assert code == 1 and out == ""
    assert "verifyctl migrate" in _one_line(err) and "schema" in err


def test_a_closed_port_asks_whether_postgresql_runs_there(monkeypatch, capsys, tmp_path):
    port = _closed_port()
    env = {"DATABASE_URL": f"postgresql://ops@127.0.0.1:{port}/verification", "VERIFY_LOCAL_DIR": str(tmp_path)}
    code, _, err = run(monkeypatch, capsys, env, "status")
    assert code == 1 and f"127.0.0.1:{port}" in _one_line(err) and "is PostgreSQL running there?" in err


def test_a_missing_database_is_named(monkeypatch, capsys, tmp_path, pg_server):
    name = f"missing_{uuid.uuid4().hex[:8]}"
    env = {"DATABASE_URL": pg_server.with_database(name).url(), "VERIFY_LOCAL_DIR": str(tmp_path)}
    code, _, err = run(monkeypatch, capsys, env, "status")
    assert code == 1 and f'database "{name}" does not exist' in _one_line(err) and "createdb" in err


def test_an_unknown_role_is_named(monkeypatch, capsys, tmp_path, pg_server):
    role = f"nobody_{uuid.uuid4().hex[:8]}"
    params = pg_server.with_database("postgres")
    url = params.url().replace(f"{params.user}@", f"{role}@", 1)
    code, _, err = run(monkeypatch, capsys, {"DATABASE_URL": url, "VERIFY_LOCAL_DIR": str(tmp_path)}, "status")
    assert code == 1 and f'role "{role}" does not exist' in _one_line(err) and "create the role" in err


# -- --version, help, --json ----------------------------------------------------------------------------
def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("verifyctl 0.")


def test_every_subcommand_has_a_description_and_every_operator_command_takes_json():
    parser = cli.build_parser()
    [sub] = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]

    def leaves(choices, prefix=""):
        for name, command in choices.items():
            assert command.description, f"`verifyctl {prefix}{name} --help` has no description"
            nested = [a for a in command._actions if a.__class__.__name__ == "_SubParsersAction"]
            if nested:  # a group (verifyctl sms ...): its actions are the commands
                yield from leaves(nested[0].choices, f"{prefix}{name} ")
            else:
                yield prefix + name, command

    for name, command in leaves(sub.choices):
        if name != "dev":  # a long-running server, not a report
            assert "--json" in command.format_help(), name
    assert "3" in parser.epilog and "status --check" in parser.epilog


def test_migrate_and_new_key_in_json(monkeypatch, capsys, tmp_path, empty_url):
    code, out, _ = run(
        monkeypatch, capsys, {"DATABASE_URL": empty_url, "VERIFY_LOCAL_DIR": str(tmp_path)}, "migrate", "--json"
    )
    assert code == 0 and json.loads(out)["migrations"][0] == "001"
    code, out, _ = run(
        monkeypatch,
        capsys,
        {"DATABASE_URL": empty_url, "VERIFY_LOCAL_DIR": str(tmp_path)},
        "migrate",
        "--list",
        "--json",
    )
    assert code == 0 and {e["state"] for e in json.loads(out)["migrations"]} == {"applied"}
    code, out, _ = run(
        monkeypatch,
        capsys,
        {"VERIFY_LOCAL_DIR": str(tmp_path), "DATABASE_URL": empty_url},
        "new-key",
        "--json",
        "--key-id",
        "k9",
    )
    assert code == 0 and json.loads(out)["token_keys_entry"].startswith("k9:")


# -- dispatch: logging, last run, transports ----------------------------------------------------------------
def test_dispatch_logs_like_the_functions_and_status_shows_its_last_run(service_env, db, monkeypatch, capsys):
    make_verifications(db, 1)
    assert cli.main(["status"]) == 0
    assert "last dispatch run (test): none completed" in capsys.readouterr().out
    assert cli.main(["dispatch"]) == 0
    out, err = capsys.readouterr()
    assert re.fullmatch(r"dispatch: claimed 1 in 1 batch\(es\), \d+ ms: 1 accepted\n", out), out  # a line, not JSON
    # The functions' text format and redaction, on stderr: the summary line, never the address.
    assert "INFO    signup_verification.operations.dispatcher: dispatch: claimed=1" in err
    assert "user0.acct@example.com" not in err and "console transport" in err
    assert cli.main(["status"]) == 0
    status = capsys.readouterr().out
    assert "last dispatch run (test): completed 0 s ago" in status
    worker = next(line for line in status.splitlines() if line.startswith("dispatch:test"))
    assert worker.split()[1] != "-"


def test_an_idle_dispatch_logs_nothing_but_its_report(service_env, monkeypatch, capsys):
    assert cli.main(["dispatch"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("dispatch: nothing was ready to send (") and out.count("\n") == 1
    assert [line for line in err.splitlines() if not line.startswith("verifyctl: ")] == []
    assert cli.main(["dispatch", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["claimed"] == 0


@pytest.mark.parametrize(
    "argv",
    [["status"], ["inspect", "{vid}"], ["dispatch"], ["reconcile"], ["suppression", "list"], ["migrate", "--list"],
     ["new-key"], ["sms", "resume"], ["channel", "resume", "email"], ["webhooks", "replay", "--since", "1h"]],
)  # fmt: skip
def test_every_command_prints_text_and_json_only_when_asked(service_env, db, capsys, monkeypatch, argv):
    monkeypatch.setenv("WEBHOOK_URL", "http://127.0.0.1:9/hooks")  # replay refuses without a receiver
    monkeypatch.setenv("WEBHOOK_SECRET", "whsec_" + base64.b64encode(b"s" * 24).decode())
    [vid] = make_verifications(db, 1)
    argv = [a.format(vid=vid) for a in argv]
    assert cli.main(argv) == 0
    text = capsys.readouterr().out
    assert text.strip() and not text.lstrip().startswith(("{", "[")), text
    assert cli.main([*argv, "--json"]) == 0
    json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("argv", [["reconcile"], ["--json", "reconcile"]])
def test_reconcile_prints_a_line_or_with_json_the_targets_answer(service_env, db, capsys, argv):
    make_verifications(db, 1)
    db.run("UPDATE delivery_intents SET status = 'claimed', lease_owner = 'gone', lease_until = now() - interval '1 s', "
           "lease_version = 1")  # fmt: skip
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    if "--json" in argv:
        assert json.loads(out)["moves"]["claims_expired"] == 1
    else:
        assert re.fullmatch(r"reconcile: 1 row\(s\) moved in \d+ ms: claims_expired 1\n", out), out
        assert cli.main(argv) == 0
        assert capsys.readouterr().out.startswith("reconcile: nothing to do (")


def test_dispatch_beside_a_running_dev_sends_to_its_mailbox(service_env, db, monkeypatch, capsys, tmp_path):
    make_verifications(db, 1)
    ports = [_closed_port(), _closed_port()]
    with MailboxServer("127.0.0.1", ports[0], ports[1]) as mailbox:
        child_env = {
            "EMAIL_TRANSPORT": "smtp",
            "SMTP_HOST": "127.0.0.1",
            "SMTP_PORT": str(ports[0]),
            "SMTP_SECURITY": "none",
            "DATABASE_URL": "postgresql://ignored@127.0.0.1:1/x",
        }
        devenv.publish(tmp_path / "local", child_env, mailbox.web_url)  # as `verifyctl dev` does, this pid
        try:
            assert cli.main(["dispatch"]) == 0
        finally:
            devenv.withdraw(tmp_path / "local")
        out, err = capsys.readouterr()
        assert out.startswith("dispatch: claimed 1 ") and out.endswith(": 1 accepted\n")
        assert f"sending through the running `verifyctl dev`: mailbox {mailbox.web_url}/" in err
        assert [m.recipients for m in mailbox.mailbox.messages()] == [["user0.acct@example.com"]]
    assert not (tmp_path / "local" / devenv.STATE_FILE).exists()


def test_a_state_file_of_a_dead_dev_is_ignored(tmp_path):
    devenv.publish(tmp_path, {"EMAIL_TRANSPORT": "smtp"}, "http://localhost:1")
    state = json.loads((tmp_path / devenv.STATE_FILE).read_text())
    assert oct((tmp_path / devenv.STATE_FILE).stat().st_mode & 0o777) == "0o600"
    state["pid"] = 2**22 + 12345  # beyond pid_max's default: no such process
    (tmp_path / devenv.STATE_FILE).write_text(json.dumps(state))
    assert devenv.running(tmp_path) is None and devenv.environment(tmp_path) is None


# -- global options, the embedded database -----------------------------------------------------------------
def test_global_options_are_accepted_before_or_after_the_command(monkeypatch, capsys, tmp_path, empty_url):
    env = {"DATABASE_URL": empty_url, "VERIFY_LOCAL_DIR": str(tmp_path)}
    assert run(monkeypatch, capsys, env, "migrate")[0] == 0
    before = run(monkeypatch, capsys, env, "--json", "migrate", "--list")
    after = run(monkeypatch, capsys, env, "migrate", "--list", "--json")
    assert before[0] == after[0] == 0 and json.loads(before[1]) == json.loads(after[1])
    code, out, _ = run(monkeypatch, capsys, env, "--json", "status")
    assert code == 0 and json.loads(out)["deployment"] == "local"
    code, out, _ = run(monkeypatch, capsys, env, "--json", "sms", "resume")
    assert code == 0 and "sms_budget_left" in json.loads(out)
    code, out, _ = run(monkeypatch, capsys, env, "status")
    assert code == 0 and not out.startswith("{")  # without it, the table


def test_status_names_each_holds_scope_and_resume_takes_one(monkeypatch, capsys, tmp_path, database_url, db):
    db.run(
        "INSERT INTO channel_holds (channel, route, faults, window_started_at, last_fault_at, category, code, "
        "provider, held_at, held_until, destinations, accounts) VALUES ('sms', 'FR', 6, now(), now(), "
        "'sender_misconfigured', '21606', 'twilio', now(), now() + interval '30 minutes', "
        "ARRAY[sha256('a'), sha256('b')], ARRAY[1, 2]::bigint[])"
    )
    env = {"DATABASE_URL": database_url, "TOKEN_KEYS": TEST_TOKEN_KEYS, "VERIFY_LOCAL_DIR": str(tmp_path)}
    code, out, _ = run(monkeypatch, capsys, env, "status")
    assert code == 0 and "sms:FR" in out and "route" in out and "verifyctl channel resume sms:FR" in out
    code, out, _ = run(monkeypatch, capsys, env, "--json", "channel", "resume", "sms")  # the channel: not held
    assert code == 0 and json.loads(out) == {"channel": "sms", "scope": "account", "route": None, "was_held": False}
    code, out, _ = run(monkeypatch, capsys, env, "channel", "resume", "sms:fr")
    assert code == 0 and out.strip() == "sms:FR resumed: sends start at the next dispatch"
    assert db.one("SELECT held_until FROM channel_holds WHERE route = 'FR'")["held_until"] is None
    with pytest.raises(SystemExit) as usage:  # argparse: a usage error, one line, no traceback
        run(monkeypatch, capsys, env, "channel", "resume", "sms:France")
    assert usage.value.code == 2 and "two-letter ISO code" in capsys.readouterr().err
