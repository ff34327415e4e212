"""`./deploy.sh --check` against the stand-in cloud (support/fake_cloud.py): each preflight, made to
fail on its own, stops the run with exactly one line that names the fix, and nothing is changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.deploy_run import PROJECT, ROOT, World


def enforce(world: World, constraint: str) -> None:
    world.state["org_policies"][constraint] = {"spec": {"rules": [{"enforce": True}]}}


def allow_only(world: World, constraint: str, *values: str) -> None:
    world.state["org_policies"][constraint] = {"spec": {"rules": [{"values": {"allowedValues": list(values)}}]}}


def no_terraform(world: World) -> None:
    (world.bin / "terraform").unlink()


def old_terraform(world: World) -> None:
    world.state["terraform_version"] = "1.9.8"


def no_var_file(world: World) -> None:
    world.var_file.unlink()


def placeholders(world: World) -> None:
    world.var_file.write_text(world.var_file.read_text().replace("corp.test", "example.com"))


def example_content_sids(world: World) -> None:
    """WhatsApp enabled with the example's content SIDs: no approved template of the account."""
    world.var_file.write_text(
        world.var_file.read_text()
        + 'whatsapp = { enabled = true, from = "whatsapp:+15551230000", content_sids = '
        + '{ en = "HX00000000000000000000000000000000", ja = "HX00000000000000000000000000000001" } }\n'
    )


def logged_out(world: World) -> None:
    world.state["account"] = ""


def no_project(world: World) -> None:
    world.state["projects"] = {}


def no_billing(world: World) -> None:
    world.state["projects"][PROJECT]["billing"] = False


def invoker_iam_required(world: World) -> None:
    enforce(world, "run.managed.requireInvokerIam")


def all_users_under_drs(world: World) -> None:
    allow_only(world, "iam.allowedPolicyMemberDomains", "C0abc123")
    world.var_file.write_text(world.var_file.read_text() + 'public_access = "allUsers"\n')


def no_public_ip(world: World) -> None:
    enforce(world, "sql.restrictPublicIp")


def public_ip_chosen_where_forbidden(world: World) -> None:
    no_public_ip(world)
    world.var_file.write_text(world.var_file.read_text() + 'db_connectivity = "public_ip"\n')


def default_placeholder(world: World) -> None:
    """The var file leaves email_from unset: infra/'s default sender is @example.com."""
    world.var_file.write_text(
        "".join(line for line in world.var_file.read_text().splitlines(True) if not line.startswith("email_from"))
    )


def no_beta_commands(world: World) -> None:
    world.state["no_beta"] = True


def internal_ingress_only(world: World) -> None:
    allow_only(world, "run.allowedIngress", "internal")


def other_locations(world: World) -> None:
    allow_only(world, "gcp.resourceLocations", "us-central1")


def private_pools_only(world: World) -> None:
    allow_only(world, "cloudbuild.allowedWorkerPools", "projects/p/locations/europe-west1/workerPools/pool")


def missing_signup_site(world: World) -> None:
    world.var_file.write_text(
        world.var_file.read_text() + f'signup_site_service_account = "site@{PROJECT}.iam.gserviceaccount.com"\n'
    )


def small_quota(world: World) -> None:
    world.state["quotas"][0]["dimensionsInfos"][0]["details"]["value"] = "20"


def secret_not_supplied(world: World) -> None:
    del world.env["DEPLOY_SECRET_SENDGRID_API_KEY"]


def unreadable_secret_file(world: World) -> list[str]:
    return ["--secret-file", f"SENDGRID_API_KEY={world.tmp / 'nope.txt'}"]


PREFLIGHTS = [
    (no_terraform, "tools: terraform is not installed", "developer.hashicorp.com/terraform/install"),
    (old_terraform, "tools: terraform 1.9.8 is older than 1.11", "install Terraform >= 1.11"),
    (no_var_file, "variables:", "copy infra/terraform.tfvars.example"),
    (placeholders, "still holds example values (@example.com)", "replace them"),
    (example_content_sids, "still holds example values (HX00000000000000000000000000000000", "replace them"),
    (default_placeholder, 'leaves email_from ("Signup <no-reply@example.com>") at a default', "set each in"),
    (no_beta_commands, "tools: gcloud has no beta commands", "gcloud components install beta"),
    (logged_out, "auth: gcloud has no usable account", "gcloud auth login"),
    (no_project, f"project: {PROJECT} does not exist", "check project_id"),
    (no_billing, "billing is not enabled", f"gcloud billing projects link {PROJECT}"),
    (invoker_iam_required, "run.managed.requireInvokerIam", "exception"),
    (all_users_under_drs, "iam.allowedPolicyMemberDomains", 'remove public_access = "allUsers"'),
    (public_ip_chosen_where_forbidden, "sql.restrictPublicIp", 'remove db_connectivity = "public_ip"'),
    (internal_ingress_only, "run.allowedIngress", "exception"),
    (other_locations, "gcp.resourceLocations does not allow europe-west1", "set region"),
    (private_pools_only, "migrations: cloudbuild.allowedWorkerPools", "exception"),
    (missing_signup_site, "signup_site_service_account site@", "gcloud iam service-accounts create site"),
    (
        small_quota,
        "quota: Cloud Run in europe-west1: CpuAllocPerProjectRegion is 20, the services may use 80 vCPU",
        "request more",
    ),
    (
        secret_not_supplied,
        "secrets: SENDGRID_API_KEY (secret verify-sendgrid-api-key) has no value",
        "DEPLOY_SECRET_SENDGRID_API_KEY",
    ),
    (unreadable_secret_file, "secrets: --secret-file SENDGRID_API_KEY=", "no such readable file"),
]


@pytest.mark.parametrize("breaks, what, fix", PREFLIGHTS, ids=[p[0].__name__ for p in PREFLIGHTS])
def test_each_preflight_fails_alone_with_one_line_naming_the_fix(tmp_path: Path, breaks, what, fix):
    world = World(tmp_path)
    args = breaks(world) or []
    run = world.run("--check", *args)
    assert run.returncode == 1, run.stdout + run.stderr
    assert len(run.failures()) == 1, run.stderr
    [line] = run.failures()
    assert what in line and fix in line, line
    assert run.mutating() == []
    assert not any(line.startswith("Traceback") for line in run.stderr.splitlines())


def test_the_same_preflights_stop_a_full_run_before_it_changes_anything(tmp_path: Path):
    world = World(tmp_path)
    invoker_iam_required(world)
    run = world.run()
    assert run.returncode == 1 and len(run.failures()) == 1
    # Only the first APIs, which the organisation-policy check itself reads through, were enabled.
    assert run.mutating() == [m for m in run.mutating() if m.startswith("gcloud services enable")]


def test_domain_restricted_sharing_passes_with_the_default_public_access(tmp_path: Path):
    world = World(tmp_path)
    allow_only(world, "iam.allowedPolicyMemberDomains", "C0abc123")  # every organisation since 2024-05-03
    run = world.run("--check")
    assert run.returncode == 0 and run.failures() == []
    full = world.run()
    assert full.returncode == 0, full.stderr


def kinds(run) -> list[str]:
    return sorted(line.removeprefix("deploy.sh: check failed: ").split(":")[0] for line in run.failures())


def test_every_failing_check_of_a_stage_is_reported_at_once(tmp_path: Path):
    """One run names every fix of its stage (the policies; then what the plan tells), not one per run."""
    world = World(tmp_path)
    invoker_iam_required(world)
    internal_ingress_only(world)
    assert kinds(world.run("--check")) == ["org policy", "org policy"]
    world.state["org_policies"] = {}
    secret_not_supplied(world)
    del world.env["DEPLOY_SECRET_TWILIO_AUTH_TOKEN"]
    small_quota(world)
    assert kinds(world.run("--check")) == ["quota", "secrets", "secrets"]


def test_what_cannot_be_read_is_a_note_not_a_failure(tmp_path: Path):
    world = World(tmp_path)
    world.state["unreadable_policies"] = ["sql.restrictPublicIp", "run.allowedIngress"]
    world.state["quotas"] = []
    run = world.run("--check")
    assert run.returncode == 0, run.stderr
    assert "not checked: sql.restrictPublicIp run.allowedIngress" in run.stderr
    assert "no Cloud Run CPU quota for europe-west1" in run.stderr


def test_the_example_filled_in_passes_though_its_comments_keep_the_placeholders(tmp_path: Path):
    world = World(tmp_path)
    example = (ROOT / "infra" / "terraform.tfvars.example").read_text()
    filled = "\n".join(
        line
        if line.lstrip().startswith("#")
        else line.split(" #")[0]
        .replace("my-signup-prod", PROJECT)
        .replace("@example.com", "@corp.test")
        .replace("AC00000000000000000000000000000000", "AC1234567890abcdef1234567890abcdef")
        .replace("+14155550100", "+15551230000")
        for line in example.splitlines()
    )
    assert "@example.com" in filled and "my-signup-prod" in filled  # in the comments
    world.var_file.write_text(filled)
    run = world.run("--check")
    assert run.returncode == 0, run.stderr


def test_a_check_named_in_deploy_skip_checks_becomes_a_note(tmp_path: Path):
    world = World(tmp_path)
    small_quota(world)
    world.env["DEPLOY_SKIP_CHECKS"] = "quota"
    run = world.run("--check")
    assert run.returncode == 0 and run.failures() == []
    assert "skipped by DEPLOY_SKIP_CHECKS: quota: Cloud Run in europe-west1" in run.stderr


def planned_vars(run) -> list[list[str]]:
    return [[a for a in c["argv"] if a.startswith("-var=db_connectivity")] for c in run.calls if "plan" in c["argv"]]


def test_where_public_ip_is_forbidden_the_deploy_takes_private_ip_and_keeps_it(tmp_path: Path):
    """sql.restrictPublicIp (secure-by-default organisations): no failure, the private_ip mode, said
    in a note; a later run that cannot read the policy keeps the deployment's mode (its state), and
    a var file that insists on the public IP is refused there."""
    world = World(tmp_path)
    no_public_ip(world)
    run = world.run()
    assert run.returncode == 0 and run.failures() == [], run.stderr
    assert 'deploying with db_connectivity = "private_ip"' in run.stderr
    assert {tuple(v) for v in planned_vars(run)} == {("-var=db_connectivity=private_ip",)}  # every plan of the run
    assert world.state["outputs"]["db_connectivity"] == "private_ip"
    # The deployer of a later run may not read organisation policies: the state decides.
    world.state["unreadable_policies"] = ["sql.restrictPublicIp"]
    again = world.run()
    assert again.returncode == 0, again.stderr
    assert planned_vars(again) == [["-var=db_connectivity=private_ip"]]  # the whole plan: nothing to change
    # A var file that insists on the public IP is refused while the policy is readable.
    world.state["unreadable_policies"] = []
    public_ip_chosen_where_forbidden(world)
    refused = world.run("--check")
    assert refused.returncode == 1 and "sql.restrictPublicIp" in refused.failures()[0]


def test_without_the_policy_nothing_is_added_to_the_plan(tmp_path: Path):
    world = World(tmp_path)
    run = world.run("--check")
    assert run.returncode == 0 and planned_vars(run) == [[]]
    assert "db_connectivity" not in run.stderr
