"""infra/*.tf, parsed with python-hcl2: who may do what (least privilege), where migrations run, the
waits of a first apply, pgAudit, and the variables' validation against the targets they configure."""

from __future__ import annotations

import re

from support.terraform_model import INFRA, first, load_infra

ROOT = INFRA.parent


def test_the_build_account_reaches_only_the_bundle_and_its_repository():
    """It cannot read or rewrite Terraform state: no project-wide storage role at all."""
    infra = load_infra()
    project_roles = infra.resources("google_project_iam_member")
    build_project_roles = [r for r in project_roles.values() if "google_service_account.build" in r["member"]]
    assert [r["role"] for r in build_project_roles] == ["roles/logging.logWriter"]  # its own build log
    reads = infra.resource("google_storage_bucket_iam_member", "build_reads_source")
    assert reads["bucket"] == "${google_storage_bucket.source.name}" and reads["role"] == "roles/storage.objectViewer"
    push = infra.resource("google_artifact_registry_repository_iam_member", "build_push")
    assert push["repository"] == "${google_artifact_registry_repository.functions.name}"
    assert push["role"] == "roles/artifactregistry.writer"
    text = "\n".join(p.read_text() for p in INFRA.glob("*.tf"))
    assert "roles/storage.objectAdmin" not in text and "roles/storage.admin" not in text


def test_database_roles_are_bound_to_the_one_instance_and_functions_get_no_log_role():
    infra = load_infra()
    grant = infra.resource("google_project_iam_member", "database_client")
    assert grant["for_each"] == "${local.database_client_grants}"
    condition = first(grant["condition"])
    assert condition["expression"] == (
        "resource.name == 'projects/${var.project_id}/instances/${local.instance_name}' "
        "&& resource.type == 'sqladmin.googleapis.com/Instance'"
    )
    assert infra.resource("google_sql_database_instance", "main")["name"] == "${local.instance_name}"
    grants = infra.locals["database_client_grants"]
    assert '["roles/cloudsql.client", "roles/cloudsql.instanceUser"]' in grants
    clients = infra.locals["database_clients"]
    assert (
        "google_service_account.function[key].member" in clients and "google_service_account.migrator.member" in clients
    )
    # The only project-level grants: these two, and the build account's log writing. Cloud Run
    # collects a function's stdout without any role, so no function holds roles/logging.logWriter.
    assert sorted(infra.resources("google_project_iam_member")) == ["build_logs", "database_client"]
    assert (
        infra.resource("google_project_iam_member", "build_logs")["member"] == "${google_service_account.build.member}"
    )


def test_migrations_and_grants_run_in_google_cloud_as_the_migrator():
    infra = load_infra()
    job = infra.resource("google_cloud_run_v2_job", "schema")
    assert job["for_each"] == "${local.schema_jobs}"
    task = first(first(job["template"])["template"])
    assert task["service_account"] == "${google_service_account.migrator.email}"
    container = first(task["containers"])
    assert container["image"] == "${local.image}"  # the same bundle the functions run
    assert container["command"] == ["/cnb/lifecycle/launcher"]
    assert container["args"] == "${concat(local.verifyctl, each.value)}"
    assert infra.locals["verifyctl"] == ["python3", "-m", "signup_verification.cli"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["DB_USER"] == "${google_sql_user.migrator.name}" and env["ENVIRONMENT"] == "production"
    jobs = infra.locals["schema_jobs"]
    assert (
        jobs["migrate"] == ["migrate"] and '"--${spec.db_role}=${google_sql_user.function[key].name}"' in jobs["grant"]
    )
    migrator = infra.resource("google_sql_user", "migrator")
    assert migrator["type"] == "CLOUD_IAM_SERVICE_ACCOUNT" and migrator["database_roles"] == ["cloudsqlsuperuser"]
    # deploy.sh runs both jobs, migrations first, before the last apply deploys new code.
    script = (ROOT / "deploy.sh").read_text()
    assert script.index("run_schema_jobs") < script.index('tf_plan "$BUILD/tfplan"\n  if')
    assert "schema_jobs" in (INFRA / "outputs.tf").read_text()


def test_pgaudit_is_configured_and_created_where_the_server_has_it():
    instance = load_infra().resource("google_sql_database_instance", "main")
    flags = {f["name"]: f["value"] for f in first(instance["settings"])["database_flags"]}
    assert flags["cloudsql.enable_pgaudit"] == "on"
    assert flags["pgaudit.log"] == "ddl,role"  # never read/write: statements name destinations
    migration = (ROOT / "sql" / "020_pgaudit.sql").read_text()
    assert "CREATE EXTENSION IF NOT EXISTS pgaudit" in migration
    # Guarded: the embedded server and plain PostgreSQL without the library skip it.
    assert "cloudsql.enable_pgaudit" in migration and "shared_preload_libraries" in migration


def test_provider_constraint_admits_only_versions_with_the_arguments_used():
    """google_sql_user.database_roles exists from hashicorp/google 7.18 (7.17: "Unsupported argument")."""
    infra = load_infra()
    [providers] = first(infra.files["versions.tf"]["terraform"])["required_providers"]
    assert providers["google"]["version"] == ">= 7.18, < 8.0"
    assert "database_roles" in infra.resource("google_sql_user", "migrator")
    assert providers["time"]["source"] == "hashicorp/time"


def test_the_first_apply_waits_for_propagated_grants_and_visible_metrics():
    """Both races of a first apply on an empty project (the grants and the metrics exist, but
    Cloud Build, Cloud Run or Cloud Monitoring does not see them yet) are waited out."""
    infra = load_infra()
    grants = infra.resource("time_sleep", "iam_grants")
    assert grants["create_duration"] == "60s"  # Google's example for a custom build account
    triggers = " ".join(grants["triggers"].values())
    for resource in (
        "google_project_iam_member.build_logs",
        "google_storage_bucket_iam_member.build_reads_source",
        "google_artifact_registry_repository_iam_member.build_push",
        "google_project_iam_member.database_client",
        "google_secret_manager_secret_iam_member.function",
    ):
        assert resource in triggers, resource
    assert infra.resource("google_cloud_run_v2_service", "function")["depends_on"] == ["${time_sleep.iam_grants}"]
    assert "${time_sleep.iam_grants}" in infra.resource("google_cloud_run_v2_job", "schema")["depends_on"]
    metrics = infra.resource("time_sleep", "metrics")
    assert int(metrics["create_duration"].removesuffix("s")) >= 600  # "could take up to 10 minutes"
    for name in infra.resources("google_logging_metric"):
        assert f"google_logging_metric.{name}" in metrics["triggers"]["metrics"], name
    for name, policy in infra.resources("google_monitoring_alert_policy").items():
        if all("condition_matched_log" in c for c in policy["conditions"]):
            continue  # a log-match page reads the log itself, no metric
        assert policy.get("depends_on") == ["${time_sleep.metrics}"], name


def test_nothing_calls_a_new_api_before_it_answers_and_no_tick_precedes_its_grant():
    """A first apply on an empty project: the APIs just enabled refuse calls for a minute or two,
    and Cloud Scheduler ticks as soon as its jobs exist."""
    infra = load_infra()
    apis = infra.resource("time_sleep", "apis")
    assert int(apis["create_duration"].removesuffix("s")) >= 60
    assert "google_project_service.api" in apis["triggers"]["apis"]
    text = "\n".join(p.read_text() for p in INFRA.glob("*.tf"))
    # Everything waits for the wait, never for the enablement itself.
    assert not re.search(r"depends_on\s*=\s*\[[^\]]*google_project_service\.api\b", text)
    assert len(re.findall(r"depends_on\s*=\s*\[[^\]]*time_sleep\.apis", text)) >= 10
    invokers = infra.resource("time_sleep", "invokers")
    assert int(invokers["create_duration"].removesuffix("s")) >= 60
    assert "google_cloud_run_v2_service_iam_member.invoker" in invokers["triggers"]["scheduled"]
    assert 'endswith(key, "/scheduler")' in invokers["triggers"]["scheduled"]
    assert infra.resource("google_cloud_scheduler_job", "tick")["depends_on"] == ["${time_sleep.invokers}"]
    # The service agents deploy.sh creates between the APIs and phase 1 (infra/deploy/agents.sh).
    agents = infra.locals["service_agents"]
    for api in ("run", "cloudbuild", "cloudscheduler", "cloudtasks", "servicenetworking"):
        assert f'"{api}.googleapis.com"' in agents, api


def test_the_functions_variable_and_its_validation_name_every_target():
    """An example that sets `functions` plans: the validation knows every target (reports too),
    and a partial map overrides only what it names."""
    infra = load_infra()
    [keys_rule] = [v for v in infra.variables["functions"]["validation"] if "keys(var.functions)" in v["condition"]]
    allowed = re.findall(r'"(\w+)"', keys_rule["condition"])
    assert sorted(allowed) == sorted(infra.function_specs) == sorted(infra.locals["function_defaults"])
    assert infra.variables["functions"]["default"] == {}
    merged = infra.locals["functions"]
    assert "try(var.functions[key], {})" in merged and "if value != null" in merged
    example = (INFRA / "terraform.tfvars.example").read_text()
    block = example[example.index("# functions = {") :]
    assert sorted(re.findall(r"^#   (\w+)\s+=", block, re.MULTILINE)) == sorted(infra.function_specs)


def test_confirm_keeps_a_warm_instance_and_scaling_is_checked():
    infra = load_infra()
    assert infra.locals["function_defaults"]["confirm"]["min_instances"] >= 1  # no cold start on the emailed link
    service = infra.resource("google_cloud_run_v2_service", "function")
    scaling = first(first(service["template"])["scaling"])
    assert scaling["min_instance_count"] == "${local.functions[each.key].min_instances}"
    precondition = first(first(service["lifecycle"])["precondition"])
    assert "min_instances <= local.functions[each.key].max_instances" in precondition["condition"]
