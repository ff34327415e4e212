"""The package as `pip install .` leaves it: self-contained, usable from any directory.

The slow test builds a fresh virtualenv outside the checkout, installs the checkout into it (not
editable) and runs the installed `verifyctl` from an unrelated working directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from signup_verification.platform.database import Database
from support.paths import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import build_bundle  # noqa: E402


def test_pyproject_lists_every_package_folder_and_maps_sql():
    """setuptools' package list is explicit (sql/ is mapped in from outside shared/): a new
    sub-package missing from it would be missing from every installed wheel."""
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    shared = ROOT / "shared"
    folders = {".".join(p.parent.relative_to(shared).parts) for p in shared.rglob("__init__.py")}
    assert set(tool["packages"]) == folders | {"signup_verification.sql"}
    assert tool["package-dir"] == {"": "shared", "signup_verification.sql": "sql"}
    assert (ROOT / "sql" / "__init__.py").is_file()  # setuptools' editable finder needs a regular package


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """bin/ of a fresh venv with `pip install <checkout>` in it (runtime dependencies only)."""
    venv = tmp_path_factory.mktemp("installed") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return venv / "bin"


def verifyctl(bin_dir: Path, cwd: Path, *argv: str, **env: str) -> subprocess.CompletedProcess:
    base = {
        k: v for k, v in os.environ.items() if k not in {"MIGRATIONS_DIR", "VIRTUAL_ENV", "PYTHONPATH", "DATABASE_URL"}
    }
    return subprocess.run(
        [str(bin_dir / "verifyctl"), *argv], cwd=cwd, env={**base, **env}, capture_output=True, text=True, timeout=120
    )


def tables(url: str) -> set[str]:
    db = Database.from_url(url)
    try:
        return {r[0] for r in db.run("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    finally:
        db.close()


@pytest.mark.slow
def test_installed_verifyctl_migrate_creates_every_table_from_any_directory(
    installed, empty_url, database_url, tmp_path
):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    site = next(installed.parent.glob("lib/python3*/site-packages"))
    assert not (site / "signup_verification").is_symlink() and (site / "signup_verification" / "sql").is_dir()

    done = verifyctl(installed, elsewhere, "migrate", DATABASE_URL=empty_url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("applied ") and done.stdout.count("\n") == 1
    # Every table the test suite's own migrated template has (database_url is a clone of it).
    expected = tables(database_url)
    assert {"verifications", "delivery_intents", "delivery_attempts", "schema_definitions"} <= expected
    assert tables(empty_url) == expected

    again = verifyctl(installed, elsewhere, "migrate", DATABASE_URL=empty_url)
    assert (again.returncode, again.stdout) == (0, "database is up to date\n")
    listed = verifyctl(installed, elsewhere, "migrate", "--list", DATABASE_URL=empty_url)
    assert listed.returncode == 0 and "pending" not in listed.stdout and "  applied  001_schema.sql" in listed.stdout

    no_migrations = verifyctl(installed, elsewhere, "migrate", DATABASE_URL=empty_url, MIGRATIONS_DIR=str(elsewhere))
    assert no_migrations.returncode == 1 and no_migrations.stdout == ""
    assert no_migrations.stderr == f"verifyctl: no migration files (NNN_name.sql) found in {elsewhere}\n"

    # Nothing names a database: its local dir is the user's state directory, not the working
    # directory; it holds none, and only `migrate` (or `dev`) would make one: said, nothing started.
    state = tmp_path / "state"
    alone = verifyctl(installed, elsewhere, "status", XDG_STATE_HOME=str(state))
    assert alone.returncode == 1 and alone.stderr.count("\n") == 1, alone.stderr
    assert alone.stderr.startswith("verifyctl: no database: DATABASE_URL is unset, no `verifyctl dev` runs for ")
    assert str(state / "signup-verification") in alone.stderr and not state.exists()

    # `verifyctl dev` needs functions/main.py, which a wheel does not carry: it says so in one line.
    dev = verifyctl(installed, elsewhere, "dev", "--no-scheduler", DATABASE_URL=empty_url)
    assert dev.returncode == 1 and "Traceback" not in dev.stderr and dev.stderr.count("\n") == 1
    assert dev.stderr.startswith("verifyctl: verifyctl dev serves the targets of functions/main.py")
    assert list(elsewhere.iterdir()) == [] and not (site.parent / ".local").exists()


@pytest.mark.slow
def test_the_deploy_bundle_holds_what_the_wheel_holds_but_the_laptop_emulation(installed):
    """Two layouts of one package (pyproject's package-dir): a file the wheel ships and the bundle
    lacks would fail a job or a service in Google Cloud, after the database exists."""
    site = next(installed.parent.glob("lib/python3*/site-packages")) / "signup_verification"
    wheel = {
        f"signup_verification/{p.relative_to(site).as_posix()}"
        for p in site.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.relative_to(site).parts[0] != "local"
    }
    bundle = {name for name in build_bundle.bundle_files() if name.startswith("signup_verification/")}
    assert wheel - bundle == set()
    assert bundle - wheel == set()  # and nothing the wheel would not ship
