#!/usr/bin/env python3
"""Build the functions' source bundle: what Cloud Build turns into the image every target runs.

    .venv/bin/python tools/build_bundle.py [--out build/function-source.zip]

The zip holds `main.py` (functions/main.py) at its root, the `signup_verification` package without
its laptop emulation (`local/`: the embedded database, the mailbox, the scheduler; no deployed code
imports it, tests/unit/test_layers.py checks that), and a
`requirements.txt` that is requirements/runtime.txt: every runtime distribution pinned with its
hashes, resolved from pyproject's `[project].dependencies` alone (tools/lock.py), the same pins
requirements/dev.txt gives the test suite; the `local`/`test` extras (pgserver, aiosmtpd, pytest)
never reach production. The archive is
byte-for-byte reproducible (sorted entries, fixed timestamps), so its SHA-256 names the bucket
object and an unchanged tree redeploys nothing. Prints `<path> <sha256>`.

Bytecode ships with the source, for cold starts: every module compiled by this interpreter into
`__pycache__/<name>.<tag>.pyc` with hash-based invalidation (the source's hash is in the .pyc, not
its mtime, which the zip does not keep), so a new instance does not compile the package before its
first answer (~30 ms). The runtime uses them when its tag matches (Python 3.11 in
infra/deploy/cloudbuild.yaml: build with Python 3.11); any other interpreter ignores them and compiles as before.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import re
import sys
import zipfile
from pathlib import Path

from packaging.utils import canonicalize_name

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lock as lock_tool  # noqa: E402  (tools/ beside this file)

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "runtime.txt"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==", re.MULTILINE)
PACKAGE = "signup_verification"
# Development-only distributions: their presence in a bundle would be a packaging mistake.
FORBIDDEN = {"pgserver", "aiosmtpd", "pytest", "hypothesis", "signup-verification"}
FIXED_TIME = (1980, 1, 1, 0, 0, 0)
LAPTOP_ONLY = {"local"}  # the package's laptop emulation never reaches a deployed instance


class BundleError(RuntimeError):
    """The bundle cannot be built; the message says why in one line."""


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def locked_requirements(lock: Path = LOCK) -> str:
    """requirements/runtime.txt, checked: current with pyproject.toml and production-only."""
    if not lock.exists():
        raise BundleError(f"{_shown(lock)} is missing: run tools/lock.py")
    text = lock.read_text()
    names = {canonicalize_name(m.group(1)) for m in PIN.finditer(text)}
    if not names:
        raise BundleError(f"{_shown(lock)} pins nothing")
    leaked = FORBIDDEN & names
    if leaked:
        raise BundleError(f"development-only packages reached the runtime requirements: {sorted(leaked)}")
    if lock_tool.stamp_of(lock) != lock_tool.pyproject_digest():
        raise BundleError(f"{_shown(lock)} is out of date with pyproject.toml: run tools/lock.py")
    return text


def bundle_files(root: Path = ROOT) -> dict[str, bytes]:
    """Archive name -> content."""
    files = {
        "main.py": (root / "functions" / "main.py").read_bytes(),
        "requirements.txt": locked_requirements(root / "requirements" / "runtime.txt").encode(),
    }
    package_dir = root / "shared" / PACKAGE
    for path in sorted(package_dir.rglob("*")):
        relative = path.relative_to(package_dir)
        if relative.parts[0] in LAPTOP_ONLY or "__pycache__" in relative.parts or path.suffix in {".pyc", ".pyo"}:
            continue
        if path.is_file():
            files[f"{PACKAGE}/{relative.as_posix()}"] = path.read_bytes()
    for name in [n for n in files if n.endswith(".py")]:
        files[_cached(name)] = bytecode(name, files[name])
    return files


def _cached(name: str) -> str:
    """Where the import system looks for a module's bytecode: `a/__pycache__/b.cpython-311.pyc`."""
    return Path(importlib.util.cache_from_source(name)).as_posix()


def bytecode(name: str, source: bytes) -> bytes:
    """The .pyc of one module, checked by the source's hash (reproducible: no timestamp in it)."""
    code = compile(source, name, "exec", dont_inherit=True)
    flags = 0b11  # hash-based, checked (PEP 552)
    return (
        importlib.util.MAGIC_NUMBER + flags.to_bytes(4, "little") + importlib.util.source_hash(source) + _marshal(code)
    )


def _marshal(code) -> bytes:
    import marshal

    return marshal.dumps(code)


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
