"""deploy.sh's one-run flow, run for real against stand-ins of gcloud and terraform that keep one
fake project between runs (support/fake_cloud.py): an empty project deployed in one invocation,
secrets taken up front, a second run that changes nothing, interrupted runs resumed. The preflights
of `--check` are tests/system/test_deploy_script_checks.py; the same flow planned by the real
terraform is the slow test at the end."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from support.deploy_run import DEPLOY, ROOT, SECRETS, World
from support.terraform_model import planned_addresses, tf_offline

sys.path.insert(0, str(ROOT / "tools"))
import build_bundle  # noqa: E402

TOKEN_KEYS_ENTRY = re.compile(r"^[A-Za-z0-9_-]{2,}:[A-Za-z0-9_-]{43}$")


@pytest.fixture
def world(tmp_path) -> World:
    return World(tmp_path)


def test_shellcheck_is_clean():
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        if os.environ.get("CI"):
            pytest.fail("shellcheck is missing: .ci/run installs it")
        pytest.skip("shellcheck is not installed (apt-get install -y shellcheck; .ci/run does)")
    # -x follows the sourced parts (infra/deploy/*.sh), checked as deploy.sh uses them.
    result = subprocess.run([shellcheck, "-x", str(DEPLOY)], capture_output=True, text=True, cwd="/")
    assert result.returncode == 0, result.stdout


def test_the_deployers_machine_needs_pythons_standard_library_only(tmp_path):
    """No virtualenv, no install: deploy.sh builds the zip and makes the token key with `python3 -I -S`
    (the stand-in world's python3 runs with -S too, so every run below proves it)."""
    script = DEPLOY.read_text() + (ROOT / "infra" / "deploy" / "secrets.sh").read_text()
    assert "dev.py" not in script and ".venv" not in script and "pip " not in script
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(ROOT / "tools" / "build_bundle.py"), "--out", str(tmp_path / "b.zip")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(tmp_path / "b.zip"), build_bundle.build(tmp_path / "again.zip")]


def test_one_run_deploys_an_empty_project_in_order(world):
    run = world.run()
    assert run.returncode == 0, run.stderr
    steps = [s for s in run.commands("gcloud") + run.commands("terraform")]
    assert "storage buckets create gs://signup-prod-1-tfstate" in steps
    order = [
        c["tool"] + " " + " ".join(a for a in c["argv"] if not a.startswith("-"))
        for c in run.calls
        if c["tool"] == "terraform"
        or c["argv"][:2] in (["secrets", "versions"], ["builds", "submit"], ["run", "jobs"])
        or (c["argv"][:4] == ["beta", "services", "identity", "create"] and "--help" not in c["argv"])
    ]
    order = [
        o
        for o in order
        if not o.startswith(("terraform version", "terraform show", "terraform output", "gcloud secrets versions list"))
    ]
    applies = [i for i, o in enumerate(order) if o.startswith("terraform apply")]
    adds = [i for i, o in enumerate(order) if o.startswith("gcloud secrets versions add")]
    agents = [i for i, o in enumerate(order) if o.startswith("gcloud beta services identity create")]
    build = order.index("gcloud builds submit")
    migrate, grant = (
        order.index("gcloud run jobs execute verify-migrate"),
        order.index("gcloud run jobs execute verify-grant"),
    )
    # the APIs (and their wait), then their service agents, before anything that relies on them;
    # secret containers, then values; the image; migrations and grants before any code deploys.
    assert len(applies) == 4 and len(adds) == 3 and len(agents) == 4
    assert applies[0] < min(agents) and max(agents) < applies[1]
    assert applies[1] < min(adds) and max(adds) < build < applies[2] < migrate < grant < applies[3]
    assert world.state["applied"] == ["apis", "phase1", "phase2", "all"]
    assert world.state["service_agents_created"] == world.state["outputs"]["service_agents"]
    assert world.state["images"] == [world.state["outputs"]["image"]]
    assert "https://verify-confirm-123456789.europe-west1.run.app" in run.stdout
    # One identity: every terraform call carries gcloud's own token, never ADC.
    assert all(c["token_in_env"] for c in run.calls if c["tool"] == "terraform" and c["argv"][-1] != "-json")


def test_the_image_is_built_by_the_build_account_from_the_bundle(world):
    first = world.run()
    assert first.returncode == 0
    [submit] = [c["argv"] for c in first.calls if c["argv"][:2] == ["builds", "submit"]]
    assert (
        "--service-account=projects/signup-prod-1/serviceAccounts/verify-build@signup-prod-1.iam.gserviceaccount.com"
        in submit
    )
    assert f"--config={ROOT / 'infra' / 'deploy' / 'cloudbuild.yaml'}" in submit and "--no-source" in submit
    [build] = world.state["builds"].values()
    subs = build["substitutions"]
    assert subs["_IMAGE"] == world.state["outputs"]["image"] and subs["_FUNCTION_TARGET"] == "status"
    assert subs["_BUCKET"] == "signup-prod-1-verify-function-source" and subs["_BUILDER"].startswith(
        "gcr.io/buildpacks/"
    )
    assert set(subs) == {"_BUCKET", "_OBJECT", "_IMAGE", "_BUILDER", "_FUNCTION_TARGET"}  # all the config uses
    assert not [c for c in world.run().calls if c["argv"][:2] == ["builds", "submit"]]  # the image is reused


@pytest.mark.parametrize("source", ["environment", "file", "prompt"])
def test_secret_values_are_taken_up_front_and_never_shown(world, source, tmp_path):
    """Each value becomes the secret's version, before the image, the jobs or any function."""
    values = {"SENDGRID_API_KEY": "SG.only-in-memory-1", "TWILIO_AUTH_TOKEN": "tw-only-in-memory-2"}
    for setting in values:
        del world.env[f"DEPLOY_SECRET_{setting}"]
    args, typed = [], None
    if source == "environment":
        world.env.update({f"DEPLOY_SECRET_{k}": v for k, v in values.items()})
    elif source == "file":
        for setting, value in values.items():
            (tmp_path / setting).write_text(value + "\n")  # a file written by echo: its newline is dropped
            args += ["--secret-file", f"{setting}={tmp_path / setting}"]
    else:
        typed = "".join(values[k] + "\n" for k in sorted(values))  # prompted in the plan's order
    run = world.run(*args, terminal_input=typed)
    assert run.returncode == 0, run.stderr
    versions = world.state["secrets"]
    assert versions[SECRETS["SENDGRID_API_KEY"]] == [values["SENDGRID_API_KEY"]]
    assert versions[SECRETS["TWILIO_AUTH_TOKEN"]] == [values["TWILIO_AUTH_TOKEN"]]
    [token_keys] = versions[SECRETS["TOKEN_KEYS"]]  # generated: nobody had to supply it
    assert TOKEN_KEYS_ENTRY.match(token_keys)
    shown = run.stdout + run.stderr + "".join(" ".join(c["argv"]) for c in run.calls)
    for secret in [*values.values(), token_keys]:
        assert secret not in shown
    if source == "prompt":
        assert "value of SENDGRID_API_KEY" in run.stderr and "input hidden" in run.stderr


def test_a_missing_secret_value_stops_before_anything_is_applied(world):
    del world.env["DEPLOY_SECRET_TWILIO_AUTH_TOKEN"]
    run = world.run()  # stdin is not a terminal: nobody can be asked
    assert run.returncode == 1
    [line] = run.failures()
    assert "TWILIO_AUTH_TOKEN" in line and "DEPLOY_SECRET_TWILIO_AUTH_TOKEN" in line and "--secret-file" in line
    assert not [m for m in run.mutating() if not m.startswith(("gcloud services enable", "gcloud storage buckets"))]


def test_a_second_run_changes_nothing(world):
    assert world.run().returncode == 0
    before = {k: v for k, v in world.state.items() if k != "fail"}
    again = world.run()
    assert again.returncode == 0, again.stderr
    assert again.mutating() == [
        "gcloud services enable serviceusage.googleapis.com cloudresourcemanager.googleapis.com cloudbilling.googleapis.com orgpolicy.googleapis.com cloudquotas.googleapis.com"
    ]
    assert "nothing to change" in again.stdout
    assert {k: v for k, v in world.state.items() if k not in ("fail", "enabled_apis")} == {
        k: v for k, v in before.items() if k != "enabled_apis"
    }


@pytest.mark.parametrize(
    "interruption",
    [
        "terraform apply phase1",  # e.g. a quota error creating Cloud SQL
        "builds describe build-1",  # the connection dropped while the image was building
        "run jobs execute verify-migrate",  # the migrator's grants had not propagated yet
        "terraform apply all",  # a function's first revision failed
    ],
)
def test_an_interrupted_run_resumes_where_it_stopped(world, interruption):
    world.state["fail"] = {interruption: 1}
    world.state["build_polls"] = 2
    first = world.run()
    assert first.returncode == 1
    last = first.stderr.strip().splitlines()[-1]
    assert last.startswith("deploy.sh: ") and "again" in last  # one line: what failed, and to re-run
    second = world.run()
    assert second.returncode == 0, second.stderr
    # Nothing done twice that is not safe to repeat: one version per secret, one image build.
    assert all(len(v) == 1 for v in world.state["secrets"].values())
    assert len(world.state["builds"]) == 1 and world.state["images"] == [world.state["outputs"]["image"]]
    # Migrations always precede the last apply; re-running them is safe (they skip what is applied).
    assert world.state["executions"][-2:] == ["verify-migrate", "verify-grant"]
    assert world.state["applied"][-1] == "all"
    if interruption == "builds describe build-1":
        assert "waiting for build build-1" in second.stdout  # the first run's build, not a new one


def test_plan_only_changes_nothing_on_an_empty_project(world):
    run = world.run("--check")
    assert run.returncode == 0, run.stderr
    assert run.mutating() == [] and run.failures() == []
    assert "every preflight passed" in run.stdout
    # No state yet: the plan runs in a copy with a local backend (nothing exists to diff against).
    [init] = [c["argv"] for c in run.calls if "init" in c["argv"]]
    assert init[0] == f"-chdir={world.tmp / 'build' / 'check-infra'}"
    assert (world.tmp / "build" / "check-infra" / "check_override.tf").read_text().count('backend "local"') == 1
    assert "SENDGRID" not in run.stderr  # the values are there (environment): nothing to report


def test_check_after_a_deploy_plans_against_the_real_state(world):
    assert world.run().returncode == 0
    run = world.run("--plan")
    assert run.returncode == 0 and run.mutating() == []
    [init] = [c["argv"] for c in run.calls if "init" in c["argv"]]
    assert init[1:] == [
        "init",
        "-input=false",
        "-backend-config=bucket=signup-prod-1-tfstate",
        "-backend-config=prefix=signup-verification",
    ]


def test_unknown_arguments_and_help(world):
    bad = world.run("--frobnicate")
    assert bad.returncode == 1 and "unknown argument: --frobnicate" in bad.stderr and bad.calls == []
    helped = world.run("--help")
    assert helped.returncode == 0 and "--check" in helped.stdout and "--secret-file" in helped.stdout


@pytest.mark.slow  # ~45 s: the bundle, and five plans by the real terraform
def test_the_runs_plans_by_the_real_terraform_bind_no_allusers_and_order_the_phases(world, tmp_path):
    """deploy.sh's own plans, run by the real terraform (tf-offline: the providers' real schemas) on
    infra/ with the example variables filled in, in an organisation with Google's secure-by-default
    policies: Domain Restricted Sharing, and sql.restrictPublicIp (deploy.sh takes private_ip)."""
    tool, reason = tf_offline()
    if tool is None:
        pytest.skip(reason)
    world.var_file.write_text(
        (ROOT / "infra" / "terraform.tfvars.example")
        .read_text()
        .replace("@example.com", "@corp.test")
        .replace("my-signup-prod", "signup-prod-1")
        .replace("AC00000000000000000000000000000000", "AC1234567890abcdef1234567890abcdef")
        .replace("+14155550100", "+15551230000")
    )
    world.state["org_policies"]["iam.allowedPolicyMemberDomains"] = {
        "spec": {"rules": [{"values": {"allowedValues": ["C0abc123"]}}]}
    }
    world.state["org_policies"]["sql.restrictPublicIp"] = {"spec": {"rules": [{"enforce": True}]}}
    world.env.update(
        FAKE_TF_OFFLINE=tool,
        TF_OFFLINE_TERRAFORM=os.environ.get("TF_OFFLINE_TERRAFORM") or shutil.which("terraform") or "",
        TF_OFFLINE_CACHE=os.environ.get("TF_OFFLINE_CACHE") or os.path.expanduser("~/.cache/terraform-offline"),
    )
    run = world.run(timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    plans = [c["plan"] for c in run.calls if "plan" in c]
    assert len(plans) == 5  # the whole plan, the APIs, phase 1, phase 2, the rest
    assert not any("allUsers" in p for p in plans)  # Domain Restricted Sharing accepts every binding
    whole, apis, phase1, phase2, _ = (set(planned_addresses(p)) for p in plans)
    assert apis == {"time_sleep.apis"} | {a for a in whole if a.startswith("google_project_service.api[")}
    assert 'google_project_service.api["servicenetworking.googleapis.com"]' in apis
    # sql.restrictPublicIp: no public IP; the peering before the instance; every service and job in the VPC.
    assert re.search(r"ipv4_enabled\s+= false", plans[0]) and "google_service_networking_connection.sql[0]" in phase1
    assert len(re.findall(r'egress\s+= "PRIVATE_RANGES_ONLY"', plans[0])) == 6 + 2
    services = {a for a in whole if a.startswith("google_cloud_run_v2_service.function[")}
    assert len(services) == 6
    assert len(re.findall(r"invoker_iam_disabled\s+= true", plans[0])) == 2  # confirm and reports, no binding
    metrics = {a for a in whole if a.startswith("google_logging_metric.")}
    needed_first = {
        "google_sql_database_instance.main",
        "time_sleep.iam_grants",
        "time_sleep.metrics",
        "google_storage_bucket_object.source",
        "google_artifact_registry_repository.functions",
    }
    assert len(metrics) == 18 and metrics | needed_first <= phase1
    assert {a for a in whole if a.startswith("google_secret_manager_secret.secret[")} <= phase1
    assert not [a for a in phase1 if a.startswith(("google_cloud_run_v2_", "google_monitoring_alert_policy."))]
    assert {'google_cloud_run_v2_job.schema["migrate"]', 'google_cloud_run_v2_job.schema["grant"]'} <= phase2
    assert not [a for a in phase2 if a.startswith(("google_cloud_run_v2_service.", "google_cloud_scheduler_job."))]
