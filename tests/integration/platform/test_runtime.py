"""Runtime, the composition root: every connection it opens (functions and verifyctl alike) carries
the configured statement timeout and names its application."""

from __future__ import annotations

import threading

from signup_verification import cli
from signup_verification.config import load
from signup_verification.runtime import Runtime


def test_verifyctl_connects_through_the_runtime_with_the_statement_timeout(database_url, tmp_path):
    runtime = Runtime(
        load(
            {"DATABASE_URL": database_url, "DATABASE_STATEMENT_TIMEOUT_MS": "1500", "VERIFY_LOCAL_DIR": str(tmp_path)}
        ),
        application_name="verifyctl",
    )
    try:
        assert runtime.db.run("SHOW statement_timeout") == [["1500ms"]]
        assert runtime.db.run("SELECT current_setting('application_name')") == [["verifyctl"]]
    finally:
        runtime.close()


def test_one_connection_per_thread_all_closed_with_the_runtime(database_url, tmp_path):
    runtime = Runtime(load({"DATABASE_URL": database_url, "DEPLOYMENT": "t", "VERIFY_LOCAL_DIR": str(tmp_path)}))
    seen = []
    thread = threading.Thread(target=lambda: seen.append(runtime.db))
    thread.start()
    thread.join()
    assert runtime.db is runtime.db and seen[0] is not runtime.db
    assert runtime.db.run("SELECT current_setting('application_name')") == [["signup-verification:t"]]
    runtime.close()
    assert runtime.db is not seen[0]  # a fresh connection after close
    runtime.close()


def test_verifyctl_status_uses_the_configured_database(service_env, monkeypatch, capsys):
    monkeypatch.setenv("DATABASE_STATEMENT_TIMEOUT_MS", "2000")
    assert cli.main(["status", "--json"]) == 0
    assert '"deployment": "test"' in capsys.readouterr().out
