"""clients/typescript as the tests use it: npm (node, npm and the locked packages, or a skip that
fails under CI=true), the package compiled once per test session (its `build` script, tsc: ~5 s, which
`npm test` and `npm pack`'s prepack would each run again), its Node tests run against the compiled
tree, and the package as a site installs it, packed once per session from that build."""

from __future__ import annotations

import json
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


def scripts() -> dict[str, str]:
    return json.loads((PACKAGE / "package.json").read_text())["scripts"]


def node_test_command() -> list[str]:
    """What `npm test` runs after its build: `npm test` is `<build> && <Node's runner>`."""
    build, runner = scripts()["test"].split(" && ")
    assert build == scripts()["build"], "npm test no longer starts with the build: run it whole"
    return runner.split()


@pytest.fixture(scope="session")
def typescript_client_built() -> Path:
    """The package compiled (dist/), once per session: its `build` script, which `npm test` and
    prepack begin with."""
    npm()
    built = run_npm("run", "build")
    assert built.returncode == 0, built.stdout + built.stderr
    return PACKAGE / "dist"


@pytest.fixture(scope="session")
def typescript_client_tarball(tmp_path_factory: pytest.TempPathFactory, typescript_client_built: Path) -> Path:
    """`npm pack`'s tarball of the client, what a site installs (signup-verification-client-<version>.tgz),
    packed from the session's build (prepack is that same build)."""
    assert scripts()["prepack"] == scripts()["build"], "prepack is no longer the build: let npm pack run it"
    destination = tmp_path_factory.mktemp("typescript-client")
    packed = run_npm("pack", "--ignore-scripts", "--pack-destination", str(destination))
    assert packed.returncode == 0, packed.stderr
    [tarball] = destination.glob("signup-verification-client-*.tgz")
    return tarball
