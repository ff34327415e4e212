#!/usr/bin/env python3
"""Build the functions' source bundle: what Cloud Build turns into the image every target runs.

    python3 tools/build_bundle.py [--out build/function-source.zip]

Standard library only (deploy.sh runs it with a bare python3 >= 3.11, no virtualenv).

The zip is the image's whole application: everything any entry point of the image reaches, the six
functions (functions-framework serves `main.py`) and the migrate and grant jobs (`python3 -m
signup_verification.cli`). It holds `main.py` (functions/main.py) at its root, the
`signup_verification` package laid out as pyproject.toml's `package-dir` lays out the wheel (the
migrations of sql/ as `signup_verification/sql`; the templates and pages are package files) without
its laptop emulation (`local/`: the embedded database, the mailbox, the scheduler; no deployed code
imports it, tests/unit/test_layers.py checks that), and a `requirements.txt` that is
requirements/runtime.txt: every runtime distribution pinned with its hashes, resolved from
pyproject's `[project].dependencies` alone (tools/lock.py), the same pins requirements/dev.txt gives
the test suite; the `local`/`test` extras (pgserver, aiosmtpd, pytest) never reach production.

No bytecode: Google's buildpacks run `compileall -f` over the application when they build the image,
which would overwrite any shipped. The archive is byte-for-byte reproducible (sorted entries, fixed
timestamps), so its SHA-256 names the bucket object and an unchanged tree redeploys nothing. Prints
`<path> <sha256>`. tools/rehearse_deploy.py runs every job and service of the plan from it.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
import tomllib
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lock as lock_tool  # noqa: E402  (tools/ beside this file)

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "runtime.txt"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==", re.MULTILINE)
PACKAGE = "signup_verification"
# Development-only distributions: their presence in a bundle would be a packaging mistake.
FORBIDDEN = {"pgserver", "aiosmtpd", "pytest", "hypothesis", "signup-verification"}
FIXED_TIME = (1980, 1, 1, 0, 0, 0)
LAPTOP_ONLY = f"{PACKAGE}.local"  # the package's laptop emulation never reaches a deployed instance
SKIPPED = {"__pycache__", ".pytest_cache"}  # and no .pyc: see above


class BundleError(RuntimeError):
    """The bundle cannot be built; the message says why in one line."""


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def locked_requirements(lock: Path = LOCK) -> str:
    """requirements/runtime.txt, checked: current with pyproject.toml and production-only."""
    if not lock.exists():
        raise BundleError(f"{_shown(lock)} is missing: run tools/lock.py")
    text = lock.read_text()
    names = {_canonical(m.group(1)) for m in PIN.finditer(text)}
    if not names:
        raise BundleError(f"{_shown(lock)} pins nothing")
    leaked = FORBIDDEN & names
    if leaked:
        raise BundleError(f"development-only packages reached the runtime requirements: {sorted(leaked)}")
    if lock_tool.stamp_of(lock) != lock_tool.pyproject_digest():
        raise BundleError(f"{_shown(lock)} is out of date with pyproject.toml: run tools/lock.py")
    return text


def _canonical(name: str) -> str:
    """A distribution's normalized name (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _setuptools(root: Path) -> dict:
    with (root / "pyproject.toml").open("rb") as handle:
        return tomllib.load(handle)["tool"]["setuptools"]


def package_sources(root: Path = ROOT) -> dict[str, Path]:
    """Archive folder -> the checkout's folder, as pyproject's `package-dir` lays out the wheel:
    `signup_verification` from shared/, `signup_verification/sql` from sql/."""
    mapped = _setuptools(root).get("package-dir", {})
    sources = {PACKAGE: root / mapped.get("", ".") / PACKAGE}
    sources.update({name: root / folder for name, folder in mapped.items() if name.startswith(PACKAGE + ".")})
    return {name.replace(".", "/"): folder for name, folder in sources.items()}


def bundle_files(root: Path = ROOT) -> dict[str, bytes]:
    """Archive name -> content."""
    files = {
        "main.py": (root / "functions" / "main.py").read_bytes(),
        "requirements.txt": locked_requirements(root / "requirements" / "runtime.txt").encode(),
    }
    laptop = LAPTOP_ONLY.replace(".", "/") + "/"
    for prefix, folder in package_sources(root).items():
        for path in sorted(folder.rglob("*")):
            relative = path.relative_to(folder)
            name = f"{prefix}/{relative.as_posix()}"
            if path.is_file() and not SKIPPED & set(relative.parts) and not name.startswith(laptop):
                files[name] = path.read_bytes()
    # Every package the wheel has, but the laptop's, is in the bundle (a mapping missed here is a job
    # that fails on import in Google Cloud, after the database exists).
    for package in _setuptools(root)["packages"]:
        init = package.replace(".", "/") + "/__init__.py"
        if init not in files and not (package + ".").startswith(LAPTOP_ONLY + "."):
            raise BundleError(f"package {package} (pyproject.toml) is missing from the bundle")
    return files


def write_zip(files: dict[str, bytes], out: Path) -> str:
    """Write a reproducible zip; returns its SHA-256 hex digest."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with zipfile.ZipFile(tmp, "w") as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, files[name], compresslevel=9)
    tmp.replace(out)
    return hashlib.sha256(out.read_bytes()).hexdigest()


def build(out: Path, root: Path = ROOT) -> str:
    return write_zip(bundle_files(root), out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "function-source.zip")
    args = parser.parse_args(argv)
    try:
        digest = build(args.out)
    except (BundleError, OSError) as exc:
        print(f"build_bundle: {exc}", file=sys.stderr)
        return 1
    print(f"{args.out} {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
