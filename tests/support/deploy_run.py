"""Running deploy.sh against the stand-in cloud (support/fake_cloud.py): the world it starts from,
the run, and what it did. Used by tests/system/test_deploy_script*.py."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy.sh"
FAKE = Path(__file__).resolve().parent / "fake_cloud.py"
PROJECT = "signup-prod-1"
SECRETS = {
    "SENDGRID_API_KEY": "verify-sendgrid-api-key",
    "TOKEN_KEYS": "verify-token-keys",
    "TWILIO_AUTH_TOKEN": "verify-twilio-auth-token",
}
# Calls that change the cloud; a --check or a refused preflight makes none of them.
MUTATING = (
    ("gcloud", "services enable"),
    ("gcloud", "storage buckets create"),
    ("gcloud", "storage buckets update"),
    ("gcloud", "secrets versions add"),
    ("gcloud", "builds submit"),
    ("gcloud", "run jobs execute"),
    ("terraform", "apply"),
)
VAR_FILE = f"""project_id = "{PROJECT}"
region     = "europe-west1"
email_from = "Signup <no-reply@corp.test>"
notification_email = "oncall@corp.test"
sms_allowed_countries = ["US"]
twilio_account_sid = "AC1234567890abcdef1234567890abcdef"
twilio_from = "+15551230000"
"""


def empty_project() -> dict[str, Any]:
    """A new project with billing, no organisation policy, default quotas, nothing deployed."""
    return {
        "account": "deployer@corp.test",
        "projects": {PROJECT: {"number": "123456789", "billing": True}},
        "org_policies": {},
        "quotas": [
            {
                "quotaId": "CpuAllocPerProjectRegion",
                "dimensions": ["region"],
                "dimensionsInfos": [{"dimensions": {"region": "europe-west1"}, "details": {"value": "1000"}}],
            }
        ],
        "service_accounts": [],
        "outputs": {
            "required_secrets": dict(SECRETS),
            "run_capacity": {"instances": 80, "cpu": 1, "memory": "512Mi"},
            "build": {
                "service_account": f"projects/{PROJECT}/serviceAccounts/verify-build@{PROJECT}.iam.gserviceaccount.com",
                "bucket": f"{PROJECT}-verify-function-source",
                "object": "function-source-abc.zip",
                "builder": "gcr.io/buildpacks/builder:google-22@sha256:" + "8" * 64,
                "function_target": "status",
            },
            "image": f"europe-west1-docker.pkg.dev/{PROJECT}/verify-functions/functions:abc",
            "schema_jobs": ["verify-migrate", "verify-grant"],
            "service_agents": [
                "run.googleapis.com",
                "cloudbuild.googleapis.com",
                "cloudscheduler.googleapis.com",
                "cloudtasks.googleapis.com",
            ],
            "function_urls": {"confirm": "https://verify-confirm-123456789.europe-west1.run.app"},
        },
    }


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    calls: list[dict[str, Any]]

    def failures(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("deploy.sh: check failed: ")]

    def commands(self, tool: str) -> list[str]:
        """Each call of `tool` as its words (flags left out), e.g. "secrets versions add ID"."""
        return [" ".join(a for a in c["argv"] if not a.startswith("-")) for c in self.calls if c["tool"] == tool]

    def mutating(self) -> list[str]:
        return [f"{tool} {cmd}" for tool, prefix in MUTATING for cmd in self.commands(tool) if cmd.startswith(prefix)]


class World:
    """One fake project and the machine deploy.sh runs on; runs accumulate in it."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.bin = tmp / "bin"
        self.bin.mkdir()
        for tool in ("gcloud", "terraform"):
            path = self.bin / tool
            # -S: the stand-ins and deploy.sh's own snippets need only the standard library (~5x faster start).
            path.write_text(
                f"#!{sys.executable} -S\nimport os, runpy\nos.environ['FAKE_TOOL'] = {tool!r}\nrunpy.run_path({str(FAKE)!r}, run_name='__main__')\n"
            )
            path.chmod(0o755)
        (self.bin / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
        (self.bin / "python3").chmod(0o755)
        self.state_file = tmp / "cloud.json"
        self.log = tmp / "calls.jsonl"
        self.var_file = tmp / "prod.tfvars"
        self.var_file.write_text(VAR_FILE)
        self.state = empty_project()
        self.env = {
            # /usr/local/bin is left out: a real terraform lives there.
            "PATH": f"{self.bin}:/usr/bin:/bin",
            "HOME": str(tmp),
            "FAKE_CLOUD": str(self.state_file),
            "FAKE_LOG": str(self.log),
            "DEPLOY_VAR_FILE": str(self.var_file),
            "DEPLOY_BUILD_DIR": str(tmp / "build"),
            "DEPLOY_POLL_SECONDS": "0",
            "DEPLOY_SECRET_SENDGRID_API_KEY": "SG.test-sendgrid-value",
            "DEPLOY_SECRET_TWILIO_AUTH_TOKEN": "twilio-test-token-value",
        }

    def save(self) -> None:
        self.state_file.write_text(json.dumps(self.state))

    def reload(self) -> dict[str, Any]:
        self.state = json.loads(self.state_file.read_text())
        return self.state

    def run(self, *args: str, terminal_input: str | None = None, timeout: int = 180) -> Run:
        """deploy.sh ARGS; with terminal_input, stdin is a terminal that has had that typed."""
        self.save()
        self.log.unlink(missing_ok=True)
        cmd = ["bash", *(["-x"] if os.environ.get("DEPLOY_TRACE") else []), str(DEPLOY), *args]
        if terminal_input is None:
            done = subprocess.run(
                cmd, env=self.env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
            )
            stdout, stderr, code = done.stdout, done.stderr, done.returncode
        else:
            master, slave = pty.openpty()
            proc = subprocess.Popen(
                cmd, env=self.env, stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            os.close(slave)
            os.write(master, terminal_input.encode())
            stdout, stderr = proc.communicate(timeout=timeout)
            os.close(master)
            code = proc.returncode
        self.reload()
        calls = [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []
        crashed = [c for c in calls if "crash" in c]
        assert not crashed, f"the stand-in crashed: {crashed}"
        return Run(code, stdout, stderr, calls)
