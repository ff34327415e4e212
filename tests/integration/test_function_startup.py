"""What a Cloud Function instance imports before its first answer (cold start <= 2x a
trivial function). Each deployment serves one target of functions/main.py: the others' code (the
dispatcher, the reconciler, cryptography for the report signatures, the HTTP provider clients) must
not load there, while the configuration is still checked whole at import."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import pytest

from signup_verification.platform.config import Target
from support.paths import ROOT, TEST_TOKEN_KEYS

# Never needed by create_verification: each costs start-up time on every one of its cold starts.
NOT_FOR_CREATE = (
    "cryptography",
    "urllib3",
    "phonenumbers",  # only when an SMS destination is parsed
    "email_validator",  # only when an email destination is (the first request imports it)
    "google.cloud.logging_v2",  # after the first answer (platform/log_handoff.py)
    "google.cloud.sql.connector",  # only with INSTANCE_CONNECTION_NAME
    "signup_verification.api.confirm",
    "signup_verification.operations.dispatcher",
    "signup_verification.delivery.reports",
    "signup_verification.delivery.channels.webhook",
    "signup_verification.operations.reconciler.runner",
    "signup_verification.platform.cloudsql",
    "signup_verification.local.embedded",
    # config/ reads every concern's settings from their own light modules, not beside the code
    "smtplib",
    "signup_verification.delivery.messages",  # the renderer (MIME, the outbox types)
    "signup_verification.delivery.mime",
    "signup_verification.delivery.events",
    "signup_verification.delivery.channels",  # the adapters, their package included
    "signup_verification.outbox.transitions",
    "signup_verification.platform.migrations",  # the runner
    "signup_verification.platform.migration_files",
    "signup_verification.operations.signals",
    "signup_verification.verifications.confirm",
    "signup_verification.api.delivery_reports",
    "signup_verification.api.report_signatures",
    "signup_verification.api.pages",  # the confirm pages: edge.py takes their headers from api/page_headers.py
)


_MODULES = "import json, os, sys, main; print(json.dumps(sorted(sys.modules))); sys.stdout.flush(); os._exit(0)"


def _import_main(target: str, probe: str = _MODULES, **settings: str) -> subprocess.CompletedProcess[str]:
    """`import main` in a fresh interpreter as a deployed instance of `target` starts (then `probe`)."""
    env = {
        **os.environ,
        "FUNCTION_TARGET": target,
        "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",  # import never connects
        "TOKEN_KEYS": TEST_TOKEN_KEYS,
        "ENVIRONMENT": "local",
        "LOG_FORMAT": "json",
        **settings,
    }
    return subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT / "functions", env=env, capture_output=True, text=True, timeout=60
    )


def _modules(target: str) -> set[str]:
    done = _import_main(target)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout))


def _loaded(modules: set[str], name: str) -> bool:
    return any(m == name or m.startswith(name + ".") for m in modules)


def test_create_verification_imports_only_what_it_needs():
    modules = _modules("create_verification")
    assert [name for name in NOT_FOR_CREATE if _loaded(modules, name)] == []
    # ... and its own request path is imported at start, not on the first request
    assert {"pydantic", "signup_verification.api.create", "signup_verification.api.models"} <= modules


@pytest.mark.parametrize(
    ("target", "own", "foreign"),
    [
        ("confirm_verification", "signup_verification.api.confirm", "signup_verification.api.models"),
        ("dispatch", "signup_verification.operations.dispatcher", "signup_verification.api.create"),
        ("reconcile", "signup_verification.operations.reconciler.runner", "signup_verification.operations.dispatcher"),
        ("status", "signup_verification.operations.signals", "signup_verification.operations.reconciler.runner"),
        ("delivery_reports", "cryptography", "signup_verification.operations.dispatcher"),
    ],
)
def test_each_target_preloads_its_own_modules_and_not_the_others(target, own, foreign):
    modules = _modules(target)
    assert _loaded(modules, own)
    assert not _loaded(modules, foreign)


# The server functions-framework builds once main.py is imported: does it open gunicorn's control socket?
_SERVER_PROBE = (
    "import os, sys, flask{main}\n"
    "from functions_framework._http.gunicorn import GunicornApplication\n"
    "server = GunicornApplication(flask.Flask('probe'), '127.0.0.1', 0, False)\n"
    "print(server.cfg.control_socket_disable); sys.stdout.flush(); os._exit(0)"
)


def test_the_server_of_every_function_opens_no_control_socket():
    """Every function on one machine would bind gunicorn's one control-socket path, the later ones
    logging `Control server error: [Errno 98]` (platform/serving.py): main.py turns it off."""
    plain = _import_main("dispatch", _SERVER_PROBE.format(main=""))
    assert (plain.returncode, plain.stdout) == (0, "False\n"), plain.stderr[-2000:]  # gunicorn's own default: on
    for target in ("create_verification", "dispatch"):
        served = _import_main(target, _SERVER_PROBE.format(main=", main"))
        assert (served.returncode, served.stdout) == (0, "True\n"), served.stderr[-2000:]


def test_each_target_is_one_entry_point_serving_itself():
    """functions/main.py defines one function per Target, named by it, and each serves its own target."""
    tree = ast.parse((ROOT / "functions" / "main.py").read_text())
    served = {
        node.name: ast.unparse(node.body[-1])
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and [ast.unparse(d) for d in node.decorator_list] == ["functions_framework.http"]
    }
    assert served == {t.value: f"return _serve(Target.{t.name}, request)" for t in Target}


def test_an_unknown_target_is_refused_at_start_with_one_line():
    """A FUNCTION_TARGET that names no target (a short name, a typo) stops the instance at import,
    before functions-framework looks for its function: one line naming the targets there are."""
    done = _import_main("confirm")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "signup-verification: FUNCTION_TARGET must be one of create_verification, confirm_verification, dispatch, "
        "reconcile, status, delivery_reports, got 'confirm'"
    ]


def test_a_bad_setting_of_another_concern_still_fails_the_start_with_every_problem():
    # create never sends nor reconciles, yet their settings are still checked when it starts
    done = _import_main("create_verification", SMTP_PORT="twenty-five", RECONCILE_BATCH_SIZE="many")
    assert done.returncode != 0
    assert "SMTP_PORT must be an integer" in done.stderr
    assert "RECONCILE_BATCH_SIZE must be a number" in done.stderr
