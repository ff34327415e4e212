"""The deployable bundle (tools/build_bundle.py): what Cloud Build receives and installs.

These tests check its contents and serve every Terraform target from the bundle's own main.py.
What Cloud Build and Cloud Run then do with it (a fresh virtualenv from its requirements.txt alone,
every job and service of the plan, against Cloud SQL's role model) is tests/system/test_rehearsal.py.
"""

from __future__ import annotations

import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from signup_verification.platform.catalogue import FUNCTIONS, OWNERS, QUERIES
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
    # no bytecode: the buildpack's `compileall -f` writes the image's own
    assert not any(n.endswith((".pyc", ".pyo")) or "__pycache__" in n for n in names)


def test_the_migrations_ship_inside_the_package_as_the_wheel_has_them(bundle: Path):
    """The migrate job runs `python3 -m signup_verification.cli migrate` from the bundle: sql/ is the
    package's `signup_verification.sql` (pyproject's package-dir), every migration and definition."""
    names = set(zipfile.ZipFile(bundle).namelist())
    sql = ROOT / "sql"
    expected = {f"signup_verification/sql/{p.relative_to(sql).as_posix()}" for p in sql.rglob("*") if p.is_file()}
    expected = {n for n in expected if "__pycache__" not in n}
    assert {"signup_verification/sql/__init__.py", "signup_verification/sql/001_schema.sql"} <= expected <= names
    assert "signup_verification/sql/schema.sql" in names
    # and every catalogue file (queries/, functions/), page and template the package holds
    catalogues = [f"{o}/{kind}" for o in OWNERS if o != "local" for kind in (QUERIES, FUNCTIONS)]
    for folder in [*catalogues, "api/pages", "delivery/templates"]:
        here = ROOT / "shared" / "signup_verification" / folder
        files = {
            f"signup_verification/{folder}/{p.relative_to(here).as_posix()}" for p in here.rglob("*") if p.is_file()
        }
        assert {n for n in files if "__pycache__" not in n} <= names, folder


def test_a_package_the_bundle_would_miss_is_a_clear_error(tmp_path: Path):
    """sql/ reaches the package only through pyproject's package-dir: without that mapping the build stops."""
    (tmp_path / "functions").mkdir()
    (tmp_path / "functions" / "main.py").write_text("")
    shutil.copytree(ROOT / "requirements", tmp_path / "requirements")
    shutil.copytree(ROOT / "shared", tmp_path / "shared", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"signup_verification.sql" = "sql"\n' in pyproject
    (tmp_path / "pyproject.toml").write_text(pyproject.replace('"signup_verification.sql" = "sql"\n', ""))
    with pytest.raises(
        build_bundle.BundleError, match=r"package signup_verification\.sql .* is missing from the bundle"
    ):
        build_bundle.bundle_files(tmp_path)


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
