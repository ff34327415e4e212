"""What a verifyctl process imports before it does anything. Every scheduled dispatch and reconcile
is a fresh process: found by tools/chaos.py, where start-ups that cost 4x the CPU (google-cloud-logging
imported for a text-format logger) left the workers too little time to send while the faults were on."""

from __future__ import annotations

import subprocess
import sys

from support.paths import ROOT


def test_verifyctl_does_not_import_google_cloud_logging_unless_it_logs_json():
    probe = (
        "import sys, signup_verification.cli, signup_verification.runtime;"
        "from signup_verification.platform import logs;"
        "logs.build_handler('text', deployment='t');"
        "print(sorted(m for m in sys.modules if m.startswith('google.cloud.logging')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    json_probe = (
        "import sys; from signup_verification.platform import logs;"
        "logs.build_handler('json', deployment='t');"
        "print('google.cloud.logging_v2.handlers' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", json_probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "True", done.stderr  # the JSON format still gets Cloud Logging's handler
