"""clients/typescript as the tests use it: npm (node, npm and the locked packages, or a skip that
fails under CI=true) and its package as a site installs it, packed once per test session
(`npm pack`: prepack compiles it, ~10 s) for every test that installs it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support.paths import ROOT

PACKAGE = ROOT / "clients" / "typescript"


def npm() -> str:
    """npm, with node and the installed packages; a skip (a failure under CI=true) without them."""
    found = shutil.which("npm")
    missing = [name for name in ("node", "npm") if shutil.which(name) is None]
    if not (PACKAGE / "node_modules").is_dir():
        missing.append("clients/typescript/node_modules (run `npm ci` there)")
    if missing or found is None:
        message = "the TypeScript client's tests need " + ", ".join(missing)
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found


def run_npm(*args: str, env: dict[str, str] | None = None, cwd: Path = PACKAGE) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [npm(), *args],
        cwd=cwd,
        env={**os.environ, **(env or {}), "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="session")
def typescript_client_tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`npm pack`'s tarball of the client, what a site installs (signup-verification-client-<version>.tgz)."""
    destination = tmp_path_factory.mktemp("typescript-client")
    packed = run_npm("pack", "--pack-destination", str(destination))
    assert packed.returncode == 0, packed.stderr
    [tarball] = destination.glob("signup-verification-client-*.tgz")
    return tarball
