"""deploy.sh: shellcheck-clean, and run for real with stand-in gcloud/terraform/verifyctl on PATH
that record how they were called (the cloud itself cannot be reached from here)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy.sh"

STUB = """#!{python}
import json, os, sys
tool = os.path.basename(sys.argv[0])
with open(os.environ["STUB_LOG"], "a") as log:
    log.write(json.dumps({{"tool": tool, "argv": sys.argv[1:],
                          "env": {{k: os.environ.get(k) for k in ("INSTANCE_CONNECTION_NAME", "DB_USER", "DB_NAME")}}}}) + "\\n")
args = [a for a in sys.argv[1:] if not a.startswith("-chdir=")]
if tool == "terraform" and args[:1] == ["output"]:
    outputs = {{"instance_connection_name": "proj:europe-west1:verify-pg", "database_name": "verification",
               "database_writers": ["verify-create@proj.iam", "verify-dispatch@proj.iam"],
               "database_readers": ["verify-status@proj.iam"]}}
    name = args[-1]
    print(json.dumps(outputs[name]) if "-json" in args else outputs.get(name, "{{}}"))
if tool == "gcloud" and args[:2] == ["config", "get-value"]:
    print("deployer@example.com")
sys.exit(int(os.environ.get("STUB_EXIT_" + tool.upper(), "0")))
"""


@pytest.fixture
def stubs(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("gcloud", "terraform", "verifyctl"):
        path = bin_dir / tool
        path.write_text(STUB.format(python=sys.executable))
        path.chmod(0o755)
    (bin_dir / "python3").symlink_to(sys.executable)
    var_file = tmp_path / "prod.tfvars"
    var_file.write_text('project_id = "proj"\n')
    return {
        # /usr/local/bin is left out: a real terraform may live there.
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "STUB_LOG": str(tmp_path / "calls.jsonl"),
        "TF_STATE_BUCKET": "proj-tfstate",
        "DEPLOY_VAR_FILE": str(var_file),
        "DEPLOY_BUILD_DIR": str(tmp_path / "build"),
        "VERIFY_PYTHON": sys.executable,
        "VERIFYCTL": str(bin_dir / "verifyctl"),
    }


def run_deploy(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(DEPLOY), *args], env=env, capture_output=True, text=True, timeout=120)


def calls(env: dict[str, str]) -> list[dict]:
    log = Path(env["STUB_LOG"])
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def terraform_commands(env: dict[str, str]) -> list[list[str]]:
    return [[a for a in c["argv"] if not a.startswith("-chdir=")] for c in calls(env) if c["tool"] == "terraform"]


def test_shellcheck_is_clean():
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        if os.environ.get("CI"):
            pytest.fail("shellcheck is missing: .ci/run installs it")
        pytest.skip("shellcheck is not installed (apt-get install -y shellcheck; .ci/run does)")
    result = subprocess.run([shellcheck, str(DEPLOY)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_plan_builds_the_bundle_and_plans_without_applying(stubs):
    result = run_deploy(stubs, "--plan")
    assert result.returncode == 0, result.stderr
    bundle = Path(stubs["DEPLOY_BUILD_DIR"]) / "function-source.zip"
    assert bundle.exists()
    gcloud = [c["argv"] for c in calls(stubs) if c["tool"] == "gcloud"]
    assert ["auth", "application-default", "print-access-token"] in gcloud
    assert all(c["argv"][0] == f"-chdir={ROOT / 'infra'}" for c in calls(stubs) if c["tool"] == "terraform")
    init, plan = terraform_commands(stubs)
    assert init == ["init", "-input=false", "-backend-config=bucket=proj-tfstate",
                    "-backend-config=prefix=signup-verification"]
    assert plan[0] == "plan"
    assert f"-var-file={stubs['DEPLOY_VAR_FILE']}" in plan
    assert f"-var=source_archive={bundle}" in plan
    assert not any(c["tool"] == "verifyctl" for c in calls(stubs)), "--plan must not migrate"


def test_full_deploy_migrates_through_the_connector_before_deploying_code(stubs):
    result = run_deploy(stubs)
    assert result.returncode == 0, result.stderr
    sequence = [c["tool"] + " " + " ".join(a for a in c["argv"] if not a.startswith("-"))
                for c in calls(stubs) if c["tool"] != "gcloud"]
    plans = [i for i, s in enumerate(sequence) if s == "terraform plan"]
    applies = [i for i, s in enumerate(sequence) if s.startswith("terraform apply")]
    migrate = sequence.index("verifyctl migrate")
    grant = next(i for i, s in enumerate(sequence) if s.startswith("verifyctl grant"))
    assert len(plans) == len(applies) == 2
    assert plans[0] < applies[0] < migrate < grant < plans[1] < applies[1]
    targeted = next(cmd for cmd in terraform_commands(stubs) if cmd[0] == "plan")
    assert "-target=google_sql_database.main" in targeted and "-target=google_sql_user.function" in targeted
    migrate_call = next(c for c in calls(stubs) if c["tool"] == "verifyctl" and c["argv"] == ["migrate"])
    assert migrate_call["env"] == {"INSTANCE_CONNECTION_NAME": "proj:europe-west1:verify-pg",
                                   "DB_USER": "deployer@example.com", "DB_NAME": "verification"}
    grant_call = next(c for c in calls(stubs) if c["tool"] == "verifyctl" and c["argv"][0] == "grant")
    assert grant_call["argv"][1:] == ["--writer=verify-create@proj.iam", "--writer=verify-dispatch@proj.iam",
                                      "--reader=verify-status@proj.iam"]
    final_plan, final_apply = terraform_commands(stubs)[-3:-1]
    assert final_plan[0] == "plan" and not any(a.startswith("-target") for a in final_plan)
    assert final_apply == ["apply", "-input=false", final_plan[-1].removeprefix("-out=")]


def test_second_run_does_the_same_steps_with_the_same_bundle(stubs):
    assert run_deploy(stubs).returncode == 0
    first_run = terraform_commands(stubs)
    bundle = (Path(stubs["DEPLOY_BUILD_DIR"]) / "function-source.zip").read_bytes()
    Path(stubs["STUB_LOG"]).unlink()
    assert run_deploy(stubs).returncode == 0
    assert terraform_commands(stubs) == first_run
    assert (Path(stubs["DEPLOY_BUILD_DIR"]) / "function-source.zip").read_bytes() == bundle


@pytest.mark.parametrize("missing, message", [
    ("TF_STATE_BUCKET", "TF_STATE_BUCKET is not set"),
    ("DEPLOY_VAR_FILE", "not found: copy infra/terraform.tfvars.example"),
])
def test_missing_setting_fails_early_with_one_clear_line(stubs, missing, message):
    if missing == "DEPLOY_VAR_FILE":
        stubs[missing] = str(Path(stubs["HOME"]) / "nope.tfvars")
    else:
        del stubs[missing]
    result = run_deploy(stubs, "--plan")
    assert result.returncode == 1
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not any(c["tool"] == "terraform" for c in calls(stubs))


def test_missing_tool_fails_early(stubs):
    (Path(stubs["PATH"].split(":")[0]) / "terraform").unlink()
    result = run_deploy(stubs, "--plan")
    assert result.returncode == 1
    assert "terraform is not installed" in result.stderr


def test_missing_credentials_fail_before_any_change(stubs):
    stubs["STUB_EXIT_GCLOUD"] = "1"
    result = run_deploy(stubs, "--plan")
    assert result.returncode == 1 and "gcloud auth application-default login" in result.stderr
    assert not any(c["tool"] == "terraform" for c in calls(stubs))


def test_terraform_failure_stops_the_deploy(stubs):
    stubs["STUB_EXIT_TERRAFORM"] = "1"
    result = run_deploy(stubs)
    assert result.returncode != 0
    assert [c["argv"][0] for c in calls(stubs) if c["tool"] == "terraform"] == [f"-chdir={ROOT / 'infra'}"]
    assert not any(c["tool"] == "verifyctl" for c in calls(stubs))
