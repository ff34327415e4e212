"""The deployable bundle (tools/build_bundle.py): what Cloud Build receives and installs.

Fast tests check its contents and serve every Terraform target from the bundle's own main.py;
the slow one does what Cloud Build does: a fresh virtualenv from the bundle's requirements.txt
alone, then every target under functions-framework (gunicorn), answering over HTTP against the
embedded database.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import venv
import zipfile
from pathlib import Path

import pytest

from support.auth import cloud_run_identity
from support.paths import TEST_TOKEN_KEYS
from support.terraform_model import load_infra

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import build_bundle  # noqa: E402

TARGETS = sorted(set(load_infra().entry_points.values()))
# One request per target that a deployed instance must answer; `None` = any non-5xx answer.
REQUESTS = {
    "create_verification": (
        "POST",
        "/",
        {"account_id": "acct_b", "channel": "email", "destination": "b@example.com"},
        {"Idempotency-Key": "bundle-1"},
        201,
    ),
    "confirm_verification": ("GET", "/?token=not-a-token", None, {}, None),
    "dispatch": ("POST", "/", {}, {}, 200),
    "reconcile": ("POST", "/", {}, {}, 200),
    "status": ("GET", "/", None, {}, 200),
    # unsigned: refused (401, or 403 where no SendGrid key is configured), never a 5xx, nothing stored
    "delivery_reports": ("POST", "/sendgrid", [], {}, None),
}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "function-source.zip"
    build_bundle.build(out)
    return out


@pytest.fixture(scope="module")
def source_dir(bundle: Path, tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("source")
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(target)
    return target


def test_bundle_layout_is_what_cloud_functions_expects(bundle: Path):
    names = set(zipfile.ZipFile(bundle).namelist())
    assert {
        "main.py",
        "requirements.txt",
        "signup_verification/__init__.py",
        "signup_verification/runtime.py",
        "signup_verification/platform/secret_manager.py",
        "signup_verification/platform/cloudsql.py",
    } <= names
    assert zipfile.ZipFile(bundle).read("main.py") == (ROOT / "functions" / "main.py").read_bytes()
    # Package data travels with the code (per-operation SQL, message templates).
    assert any(n.endswith(".sql") for n in names) and any("templates/" in n for n in names)
    assert not any("main_test" in n for n in names)
    # the laptop emulation (embedded database, mailbox, scheduler) never reaches a deployed instance
    assert not any(n.startswith("signup_verification/local/") for n in names)
    # each module's bytecode beside it, for the interpreter that built it, and nothing else
    sources = {n for n in names if n.endswith(".py")}
    compiled = {n for n in names if n.endswith(".pyc")}
    assert compiled == {Path(importlib.util.cache_from_source(n)).as_posix() for n in sources}


def test_the_bundled_bytecode_is_what_the_import_system_uses_and_is_checked_by_hash(bundle: Path, tmp_path: Path):
    """A new instance imports the shipped .pyc (no compile before its first answer); a source that
    no longer matches its .pyc is compiled afresh rather than run stale (hash-checked, PEP 552)."""
    source_dir = tmp_path / "source"
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(source_dir)
    probe = "import signup_verification.runtime"
    env = {**os.environ, "PYTHONPATH": str(source_dir), "PYTHONDONTWRITEBYTECODE": "1"}
    verbose = subprocess.run(
        [sys.executable, "-v", "-c", probe], cwd=source_dir, env=env, capture_output=True, text=True
    )
    assert verbose.returncode == 0, verbose.stderr[-2000:]
    assert "runtime.cpython" in verbose.stderr and "matches" in verbose.stderr.split("runtime.cpython")[1][:200]
    module = source_dir / "signup_verification" / "runtime.py"
    module.write_text(module.read_text() + "\nSTALE_CHECK = 1\n")
    changed = subprocess.run(
        [sys.executable, "-c", probe + "; print(signup_verification.runtime.STALE_CHECK)"],
        cwd=source_dir,
        env=env,
        capture_output=True,
        text=True,
    )
    assert changed.returncode == 0 and changed.stdout.strip() == "1", changed.stderr[-2000:]


def test_requirements_are_pinned_and_production_only(bundle: Path):
    text = zipfile.ZipFile(bundle).read("requirements.txt").decode()
    assert text == (ROOT / "requirements" / "runtime.txt").read_text()
    lines = [line for line in text.splitlines() if line and not line.startswith((" ", "#"))]
    assert all("==" in line and line.endswith("\\") for line in lines), lines  # pinned, hashes follow
    assert text.count("--hash=sha256:") >= len(lines)
    names = {line.split("==")[0].split("[")[0].lower() for line in lines}
    assert {"functions-framework", "pg8000", "cloud-sql-python-connector", "google-cloud-secret-manager"} <= names
    assert not names & {"pgserver", "aiosmtpd", "pytest", "hypothesis", "python-hcl2", "signup-verification"}
    assert len(names) == len(lines)


def test_bundle_is_reproducible_so_its_hash_names_it(bundle: Path, tmp_path: Path):
    again = tmp_path / "again.zip"
    assert build_bundle.build(again) == build_bundle.write_zip(build_bundle.bundle_files(), tmp_path / "third.zip")
    assert again.read_bytes() == bundle.read_bytes()


def test_a_development_only_dependency_is_refused(tmp_path: Path):
    lock = tmp_path / "runtime.txt"
    lock.write_text((ROOT / "requirements" / "runtime.txt").read_text() + "pgserver==0.1.4 \\\n    --hash=sha256:00\n")
    with pytest.raises(build_bundle.BundleError, match="development-only packages .*pgserver"):
        build_bundle.locked_requirements(lock)


def test_a_stale_lock_is_a_clear_error(tmp_path: Path):
    lock = tmp_path / "runtime.txt"
    text = (ROOT / "requirements" / "runtime.txt").read_text()
    lock.write_text(text.replace(lock_stamp(), "0" * 64))
    with pytest.raises(build_bundle.BundleError, match="out of date with pyproject.toml"):
        build_bundle.locked_requirements(lock)


def lock_stamp() -> str:
    return build_bundle.lock_tool.pyproject_digest()


def _check_answer(target: str, status: int, body: bytes) -> None:
    expected = REQUESTS[target][4]
    if expected is None:
        assert status < 500, body[:500]
    else:
        assert status == expected, body[:500]


@pytest.mark.parametrize("target", TARGETS)
def test_every_target_answers_from_the_bundle_source(target, source_dir: Path, service_env):
    import functions_framework

    assert target in REQUESTS, f"new target {target}: add the request it must answer to REQUESTS"
    client = functions_framework.create_app(target, str(source_dir / "main.py")).test_client()
    method, path, body, headers, _ = REQUESTS[target]
    response = client.open(path, method=method, json=body, headers=headers)
    _check_answer(target, response.status_code, response.get_data())


# ---- what Cloud Build does ----------------------------------------------------------------


@pytest.fixture(scope="module")
def fresh_venv(source_dir: Path, tmp_path_factory) -> Path:
    """A new virtualenv with nothing but the bundle's requirements.txt installed."""
    env_dir = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "-r",
            str(source_dir / "requirements.txt"),
        ],
        check=True,
        timeout=900,
    )
    return env_dir


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _request(port: int, target: str) -> tuple[int, bytes]:
    method, path, body, headers, _ = REQUESTS[target]
    headers = {"Authorization": cloud_run_identity(), **headers}  # ENVIRONMENT=production below (auth.py)
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=data,
        method=method,
        headers={**headers, **({"Content-Type": "application/json"} if data else {})},
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()
        except (ConnectionError, urllib.error.URLError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.mark.slow
def test_fresh_install_imports_nothing_from_this_repository(fresh_venv: Path, source_dir: Path):
    probe = subprocess.run(
        [
            str(fresh_venv / "bin" / "python"),
            "-c",
            "import signup_verification, google.cloud.sql.connector, main; print(signup_verification.__file__)",
        ],
        cwd=source_dir,
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert probe.returncode == 0, probe.stderr
    assert Path(probe.stdout.strip()).is_relative_to(source_dir)


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_every_target_serves_from_a_fresh_install(target, fresh_venv: Path, source_dir: Path, database_url: str):
    port = _free_port()
    env = {
        "PATH": f"{fresh_venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(source_dir.parent),
        "DATABASE_URL": database_url,
        "TOKEN_KEYS": TEST_TOKEN_KEYS,
        "ENVIRONMENT": "production",
        "SMS_ALLOWED_COUNTRIES": "US",
        "DEPLOYMENT": "bundle-test",
        "VERIFY_LINK_BASE": "https://verify.example.com/confirm/",
        "EMAIL_TRANSPORT": "console",
        "SMS_TRANSPORT": "console",
        "WORKERS": "1",
        "THREADS": "1",
        "FUNCTION_TIMEOUT_SECONDS": "20",
    }
    server = subprocess.Popen(
        [
            str(fresh_venv / "bin" / "functions-framework"),
            "--target",
            target,
            "--source",
            "main.py",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        cwd=source_dir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        status, body = _request(port, target)
        _check_answer(target, status, body)
    finally:
        server.terminate()
        output = server.communicate(timeout=30)[0].decode(errors="replace")
    assert "Traceback" not in output, output[-3000:]
