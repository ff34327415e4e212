"""What the deployed image runs, without local/ (the bundle leaves the laptop emulation out): verifyctl's
parser, every command's help, the functions' entry points and the commands that need no database, in
a fresh interpreter where importing local/ fails (tests/unit/test_layers.py checks the imports)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from support.paths import ROOT

# What the deployed image runs, without local/: the parser of every command, each command's help,
# the functions' entry points, and the commands that need no database, in production.
_WITHOUT_LOCAL = """
import contextlib, io, json, runpy, sys

class LaptopOnly:
    def find_spec(self, name, path=None, target=None):
        if name == "signup_verification.local" or name.startswith("signup_verification.local."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, LaptopOnly())
from signup_verification.cli import build_parser, main

parser = build_parser()
commands = parser._subparsers._group_actions[0].choices
for name, command in commands.items():
    command.format_help()
    for action in command._actions:
        if getattr(action, "choices", None) and hasattr(action.choices, "items"):
            for sub in action.choices.values():
                sub.format_help()
with contextlib.redirect_stdout(io.StringIO()):
    assert main(["new-key"]) == 0
runpy.run_path(sys.argv[1])
assert main(["dev"]) == 1
print(json.dumps(sorted(commands)))
"""


def test_verifyctl_and_the_functions_run_without_the_laptop_emulation():
    env = {
        **{k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "VERIFY_LOCAL_DIR"}},
        "ENVIRONMENT": "production",
        "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",  # never reached: no command here connects
    }
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_LOCAL, str(ROOT / "functions" / "main.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert {"migrate", "grant", "status", "dev"} <= set(json.loads(done.stdout.strip().splitlines()[-1]))
    assert "verifyctl: verifyctl dev needs the laptop emulation" in done.stderr
