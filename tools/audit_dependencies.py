#!/usr/bin/env python3
"""pip-audit of the pinned runtime dependencies: exactly what the deployable bundle installs.

    .venv/bin/python tools/audit_dependencies.py [--pip-audit PATH] [--require]

The pins are requirements/runtime.txt (tools/lock.py), which tools/build_bundle.py ships as the
bundle's requirements.txt: every runtime distribution, the `local`/`test` extras excluded. pip-audit asks PyPI's JSON API for known
vulnerabilities (PYSEC/GHSA/OSV ids). Exit status: 1 when a pinned version has a known
vulnerability; 0 otherwise. Where the vulnerability service cannot be reached (a machine that
reaches only a package index mirror, as this project's CI does), nothing can be audited: that is
printed as a loud NOT AUDITED line, and is a failure only with --require (or AUDIT_REQUIRED=1).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import build_bundle  # noqa: E402

DEFAULT_PIP_AUDIT = ROOT / ".local" / "tools" / "pip-audit" / "bin" / "pip-audit"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pip-audit", type=Path, default=DEFAULT_PIP_AUDIT)
    parser.add_argument(
        "--require",
        action="store_true",
        default=os.environ.get("AUDIT_REQUIRED") == "1",
        help="fail when the dependencies could not be audited at all",
    )
    args = parser.parse_args(argv)
    lock = build_bundle.LOCK
    pins = build_bundle.PIN.findall(build_bundle.locked_requirements(lock))
    done = subprocess.run(
        [str(args.pip_audit), "-r", str(lock), "--no-deps", "--disable-pip", "-f", "json", "--progress-spinner", "off"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    try:
        report = json.loads(done.stdout)
    except ValueError:
        print(f"pip-audit: NOT AUDITED: pip-audit failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
        return 1 if args.require else 0
    dependencies = report.get("dependencies", [])
    skipped = [d for d in dependencies if d.get("skip_reason")]
    vulnerable = [d for d in dependencies if d.get("vulns")]
    audited = len(dependencies) - len(skipped)
    for dep in vulnerable:
        for vuln in dep["vulns"]:
            fixes = ", ".join(vuln.get("fix_versions") or []) or "no fixed version"
            print(f"pip-audit: {dep['name']} {dep['version']}: {vuln['id']} (fixed in {fixes})")
    if audited == 0:
        reason = skipped[0]["skip_reason"] if skipped else "no dependency listed"
        print(
            f"pip-audit: NOT AUDITED: 0 of {len(pins)} pinned dependencies could be checked "
            f"(the vulnerability service is unreachable from this machine: {reason!r})"
        )
        return 1 if args.require else 0
    print(
        f"pip-audit: {audited} of {len(pins)} pinned dependencies audited, {len(vulnerable)} with known "
        f"vulnerabilities" + (f"; {len(skipped)} not audited" if skipped else "")
    )
    return 1 if vulnerable else 0


if __name__ == "__main__":
    sys.exit(main())
