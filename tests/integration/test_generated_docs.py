"""The documentation sections the code defines (tools/generate_docs.py) are current: the provider
tables of docs/channels.md, the README's settings tables and docs/state-model.md's transitions."""

from __future__ import annotations

import subprocess
import sys

from support.paths import ROOT


def test_generated_sections_are_current():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "generate_docs.py"), "--check"], capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
