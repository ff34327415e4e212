"""deploy.sh: shellcheck-clean, and run for real with stand-in gcloud/terraform/verifyctl on PATH
that record how they were called (the cloud itself cannot be reached from here)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.terraform_model import planned_addresses, tf_offline

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy.sh"

STUB = """#!{python}
import json, os, subprocess, sys
tool = os.path.basename(sys.argv[0])
args = [a for a in sys.argv[1:] if not a.startswith("-chdir=")]
entry = {{"tool": tool, "argv": sys.argv[1:],
         "env": {{k: os.environ.get(k) for k in ("INSTANCE_CONNECTION_NAME", "DB_USER", "DB_NAME")}}}}
code = int(os.environ.get("STUB_EXIT_" + tool.upper(), "0"))
if tool == "terraform" and args[:1] == ["plan"] and os.environ.get("STUB_TF_OFFLINE"):
    # The stand-in terraform: the real binary plans infra/ against the providers' real schemas.
    run = subprocess.run(["bash", os.environ["STUB_TF_OFFLINE"], "plan", os.environ["STUB_INFRA"], *args[1:]],
                         capture_output=True, text=True)
    entry["plan"], code = run.stdout + run.stderr, run.returncode
if tool == "terraform" and args[:1] == ["output"]:
    outputs = {{"instance_connection_name": "proj:europe-west1:verify-pg", "database_name": "verification",
               "database_writers": ["verify-create@proj.iam", "verify-dispatch@proj.iam"],
               "database_readers": ["verify-status@proj.iam"], "region": "europe-west1", "project_id": "proj",
               "secrets": {{"TOKEN_KEYS": "verify-token-keys", "SENDGRID_API_KEY": "verify-sendgrid-api-key"}},
               "services_without_invoker_iam_check": json.loads(os.environ.get("STUB_UNCHECKED", "[]"))}}
    name = args[-1]
    print(json.dumps(outputs[name]) if "-json" in args else outputs.get(name, "{{}}"))
if tool == "gcloud" and args[:2] == ["config", "get-value"]:
    print("deployer@example.com")
if tool == "gcloud" and args[:3] == ["secrets", "versions", "list"]:
    if args[3] not in os.environ.get("STUB_EMPTY_SECRETS", "").split(","):
        print(f"projects/proj/secrets/{{args[3]}}/versions/1")
if tool == "verifyctl" and args[:1] == ["migrate"] and os.environ.get("STUB_MIGRATE_FAILURES"):
    # Fails the first N times, as a connection refused while the migrator's IAM roles propagate.
    counter = os.environ["STUB_LOG"] + ".migrate"
    tries = int(open(counter).read()) if os.path.exists(counter) else 0
    open(counter, "w").write(str(tries + 1))
    if tries < int(os.environ["STUB_MIGRATE_FAILURES"]):
        print("verifyctl: connection refused", file=sys.stderr)
        code = 1
with open(os.environ["STUB_LOG"], "a") as log:
    log.write(json.dumps(entry) + "\\n")
sys.exit(code)
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
    assert init == [
        "init",
        "-input=false",
        "-backend-config=bucket=proj-tfstate",
        "-backend-config=prefix=signup-verification",
    ]
    assert plan[0] == "plan"
    assert f"-var-file={stubs['DEPLOY_VAR_FILE']}" in plan
    assert f"-var=source_archive={bundle}" in plan
    assert not any(c["tool"] == "verifyctl" for c in calls(stubs)), "--plan must not migrate"


def test_full_deploy_migrates_through_the_connector_before_deploying_code(stubs):
    result = run_deploy(stubs)
    assert result.returncode == 0, result.stderr
    sequence = [
        c["tool"] + " " + " ".join(a for a in c["argv"] if not a.startswith("-"))
        for c in calls(stubs)
        if c["tool"] != "gcloud"
    ]
    plans = [i for i, s in enumerate(sequence) if s == "terraform plan"]
    applies = [i for i, s in enumerate(sequence) if s.startswith("terraform apply")]
    migrate = sequence.index("verifyctl migrate")
    grant = next(i for i, s in enumerate(sequence) if s.startswith("verifyctl grant"))
    assert len(plans) == len(applies) == 2
    assert plans[0] < applies[0] < migrate < grant < plans[1] < applies[1]
    targeted = next(cmd for cmd in terraform_commands(stubs) if cmd[0] == "plan")
    assert "-target=google_sql_database.main" in targeted and "-target=google_sql_user.function" in targeted
    migrate_call = next(c for c in calls(stubs) if c["tool"] == "verifyctl" and c["argv"] == ["migrate"])
    assert migrate_call["env"] == {
        "INSTANCE_CONNECTION_NAME": "proj:europe-west1:verify-pg",
        "DB_USER": "deployer@example.com",
        "DB_NAME": "verification",
    }
    grant_call = next(c for c in calls(stubs) if c["tool"] == "verifyctl" and c["argv"][0] == "grant")
    assert grant_call["argv"][1:] == [
        "--writer=verify-create@proj.iam",
        "--writer=verify-dispatch@proj.iam",
        "--reader=verify-status@proj.iam",
    ]
    final_plan = [cmd for cmd in terraform_commands(stubs) if cmd[0] == "plan"][-1]
    final_apply = [cmd for cmd in terraform_commands(stubs) if cmd[0] == "apply"][-1]
    assert not any(a.startswith("-target") for a in final_plan)
    assert final_apply == ["apply", "-input=false", final_plan[-1].removeprefix("-out=")]


def test_first_phase_makes_the_metrics_and_waits_for_the_grants_the_last_phase_needs(stubs):
    """The alerts' metrics and the build account's grants settle during the database phase."""
    assert run_deploy(stubs).returncode == 0
    first_plan = next(cmd for cmd in terraform_commands(stubs) if cmd[0] == "plan")
    targets = {a.removeprefix("-target=") for a in first_plan if a.startswith("-target=")}
    # time_sleep.metrics depends on every log-based metric, time_sleep.iam_grants on every grant
    # (infra/waits.tf; the slow test at the end plans this phase with the real terraform).
    assert {"time_sleep.metrics", "time_sleep.iam_grants", "google_sql_database.main"} <= targets
    assert not any(t.startswith(("google_monitoring_alert_policy", "google_cloudfunctions2_function")) for t in targets)


def test_migration_is_retried_while_the_migrators_roles_propagate(stubs):
    stubs.update(STUB_MIGRATE_FAILURES="2", DEPLOY_RETRY_DELAY="0")
    result = run_deploy(stubs)
    assert result.returncode == 0, result.stderr
    assert [c["argv"] for c in calls(stubs) if c["tool"] == "verifyctl"][:3] == [["migrate"]] * 3
    assert "migrations failed (attempt 2 of 6)" in result.stderr
    assert [cmd[0] for cmd in terraform_commands(stubs)].count("apply") == 2


def test_migration_retries_are_bounded_and_nothing_deploys_after_them(stubs):
    stubs.update(STUB_MIGRATE_FAILURES="99", DEPLOY_RETRY_DELAY="0", DEPLOY_MIGRATE_ATTEMPTS="3")
    result = run_deploy(stubs)
    assert result.returncode == 1
    assert "migrations failed 3 times" in result.stderr.splitlines()[-1]
    assert [c["argv"] for c in calls(stubs) if c["tool"] == "verifyctl"] == [["migrate"]] * 3
    assert [cmd[0] for cmd in terraform_commands(stubs)].count("apply") == 1  # the database phase only


def test_a_secret_without_a_value_stops_before_any_code_deploys(stubs):
    stubs["STUB_EMPTY_SECRETS"] = "verify-sendgrid-api-key"
    result = run_deploy(stubs)
    assert result.returncode == 1
    assert "verify-sendgrid-api-key" in result.stderr and "step 5" in result.stderr
    checked = [c["argv"] for c in calls(stubs) if c["argv"][:3] == ["secrets", "versions", "list"]]
    assert sorted(a[3] for a in checked) == ["verify-sendgrid-api-key", "verify-token-keys"]
    assert all("--project=proj" in a for a in checked)  # not gcloud's own default project
    assert len(result.stderr.strip().splitlines()) == 1
    assert [cmd[0] for cmd in terraform_commands(stubs)].count("apply") == 1
    assert not any(c["tool"] == "verifyctl" for c in calls(stubs))


@pytest.mark.parametrize("unchecked", [[], ["verify-confirm"]])
def test_invoker_iam_check_is_turned_off_only_where_the_config_asks(stubs, unchecked):
    stubs["STUB_UNCHECKED"] = json.dumps(unchecked)
    assert run_deploy(stubs).returncode == 0
    updates = [c["argv"] for c in calls(stubs) if c["tool"] == "gcloud" and c["argv"][:2] == ["run", "services"]]
    assert updates == [
        ["run", "services", "update", s, "--project=proj", "--region=europe-west1", "--no-invoker-iam-check", "--quiet"]
        for s in unchecked
    ]
    if unchecked:  # after the apply that created the function's service
        tools = [c["tool"] + ":" + c["argv"][0] for c in calls(stubs)]
        last_apply = max(
            i
            for i, t in enumerate(tools)
            if t == "terraform:-chdir=" + str(ROOT / "infra") and calls(stubs)[i]["argv"][1] == "apply"
        )
        assert tools.index("gcloud:run") > last_apply


def test_the_example_variables_are_refused_until_replaced(stubs, tmp_path):
    example = (ROOT / "infra" / "terraform.tfvars.example").read_text()
    stubs["DEPLOY_VAR_FILE"] = str(ROOT / "infra" / "terraform.tfvars.example")
    result = run_deploy(stubs, "--plan")
    assert result.returncode == 1 and "still holds example values" in result.stderr
    assert not any(c["tool"] == "terraform" for c in calls(stubs))
    # Filled in, with the example's comments (which name the placeholders) kept: accepted.
    filled = tmp_path / "filled.tfvars"
    filled.write_text(
        re.sub(r'"[^"#]*@example\.com[^"#]*"', '"user:me@corp.test"', example)
        .replace('"my-signup-prod"', '"signup-prod-1"')
        .replace("@my-signup-prod.", "@signup-prod-1.")
    )
    assert "@example.com" in filled.read_text()  # in the comments
    stubs["DEPLOY_VAR_FILE"] = str(filled)
    assert run_deploy(stubs, "--plan").returncode == 0


def test_second_run_does_the_same_steps_with_the_same_bundle(stubs):
    assert run_deploy(stubs).returncode == 0
    first_run = terraform_commands(stubs)
    bundle = (Path(stubs["DEPLOY_BUILD_DIR"]) / "function-source.zip").read_bytes()
    Path(stubs["STUB_LOG"]).unlink()
    assert run_deploy(stubs).returncode == 0
    assert terraform_commands(stubs) == first_run
    assert (Path(stubs["DEPLOY_BUILD_DIR"]) / "function-source.zip").read_bytes() == bundle


@pytest.mark.parametrize(
    "missing, message",
    [
        ("TF_STATE_BUCKET", "TF_STATE_BUCKET is not set"),
        ("DEPLOY_VAR_FILE", "not found: copy infra/terraform.tfvars.example"),
    ],
)
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


@pytest.mark.slow  # ~17 s: two real terraform plans and the bundle build
def test_phases_planned_by_the_real_terraform_make_metrics_and_grants_before_alerts_and_functions(stubs, tmp_path):
    """deploy.sh's own plans, run by the real terraform (tf-offline) on infra/: the first phase
    creates every log-based metric and grant and their waits, and no alert or function."""
    tool, reason = tf_offline()
    if tool is None:
        pytest.skip(reason)
    var_file = tmp_path / "filled.tfvars"  # the example, filled in as step 4 of docs/deploy.md says
    var_file.write_text(
        (ROOT / "infra" / "terraform.tfvars.example")
        .read_text()
        .replace("@example.com", "@corp.test")
        .replace("my-signup-prod", "signup-prod-1")
    )
    stubs.update(
        DEPLOY_VAR_FILE=str(var_file),
        STUB_TF_OFFLINE=tool,
        STUB_INFRA=str(ROOT / "infra"),
        TF_OFFLINE_TERRAFORM=os.environ.get("TF_OFFLINE_TERRAFORM") or shutil.which("terraform"),
        TF_OFFLINE_CACHE=os.environ.get("TF_OFFLINE_CACHE") or str(Path.home() / ".cache" / "terraform-offline"),
    )
    result = run_deploy(stubs)
    assert result.returncode == 0, result.stderr[-3000:]
    first, last = [planned_addresses(c["plan"]) for c in calls(stubs) if "plan" in c]
    metrics = [a for a in last if a.startswith("google_logging_metric.")]
    # Every log-based metric (11 signal metrics incl. issue 13's oldest awaiting report, the oscillation
    # and SMS-budget records) is made in phase 1.
    assert len(metrics) == 12 and set(metrics) <= set(first)
    assert {"time_sleep.metrics", "time_sleep.iam_grants", "google_sql_database_instance.main"} <= set(first)
    build_grants = {a for a in last if a.startswith("google_project_iam_member.build[")}
    assert len(build_grants) == 3 and build_grants <= set(first)
    assert not [
        a for a in first if a.startswith(("google_monitoring_alert_policy.", "google_cloudfunctions2_function."))
    ]
    # tf-offline plans from empty state, so the last phase lists everything; apply order within it
    # comes from the dependencies (alerts on time_sleep.metrics, functions on time_sleep.iam_grants).
    assert (
        sum(a.startswith("google_monitoring_alert_policy.") for a in last) == 6
    )  # incl. the SMS budget and issue 13's awaiting report (the webhook page needs webhook_url)
