"""infra/ checked by the real terraform (tf-offline: stand-in providers serving the real schemas of
hashicorp/google 7.45.0 and hashicorp/time, no network): .ci/run's terraform step, and what a
second plan after an apply would show, as far as a plan from empty state can tell.

tf-offline refuses `apply`, so "apply, then plan again" runs against a state written here: what
the API would return after the first apply, modelled where a known API behaviour makes plans
noisy (the dashboard fields it drops). What else the real API or provider normalises is not seen.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from support.deploy_docs import DOCS, blocks
from support.infra_plans import EXAMPLE, copy_infra, plan_of, planned_block, run_tool
from support.terraform_model import INFRA, planned_addresses
from support.tfvars_example import commented_blocks

ROOT = INFRA.parent


@pytest.fixture(scope="module")
def plan_run() -> tuple[str, list[str]]:
    """The CI step's plan (infra/ with the example variables; a placeholder bundle, only its hash
    counts), of a copy that also outputs the dashboard JSON base64-encoded. (plan text, plan args)"""
    plan = plan_of("example")
    return plan.text, plan.args


@pytest.fixture(scope="module")
def plan_text(plan_run) -> str:
    return plan_run[0]


@pytest.fixture(scope="module")
def dashboard_json() -> dict:
    return plan_of("example").probe("dashboard_json")


def test_terraform_formats_and_validates_infra():
    fmt = run_tool("fmt-check", str(INFRA))
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr
    validate = run_tool("validate", str(INFRA))
    assert validate.returncode == 0, validate.stdout + validate.stderr
    # The constraints admit the served versions (a constraint that excluded them fails init).
    assert "hashicorp/google 7.45.0" in validate.stderr and "hashicorp/time" in validate.stderr


def test_a_broken_configuration_fails_the_step(tmp_path: Path):
    """The check can fail: an unknown argument in a copy of infra/ is terraform's error, exit 1."""
    copy = copy_infra(tmp_path / "infra")
    broken = (
        (copy / "source.tf")
        .read_text()
        .replace("force_destroy               = false", "force_destroy               = false\n  no_such_argument = 1")
    )
    (copy / "source.tf").write_text(broken)
    result = run_tool("validate", str(copy))
    assert result.returncode == 1
    assert "Unsupported argument" in result.stdout + result.stderr


def test_the_example_variables_plan_every_function_and_wait(plan_text: str):
    addresses = planned_addresses(plan_text)
    services = {a for a in addresses if a.startswith("google_cloud_run_v2_service.function[")}
    assert services == {
        f'google_cloud_run_v2_service.function["{k}"]'
        for k in ("create", "confirm", "dispatch", "reconcile", "status", "reports")
    }
    assert {'google_cloud_run_v2_job.schema["migrate"]', 'google_cloud_run_v2_job.schema["grant"]'} <= set(addresses)
    assert {"time_sleep.iam_grants", "time_sleep.metrics", "time_sleep.apis", "time_sleep.invokers"} <= set(addresses)
    assert re.search(r"^Plan: \d+ to add, 0 to change, 0 to destroy\.$", plan_text, re.MULTILINE)


def test_a_held_channel_pages_and_a_held_route_or_an_account_fault_warns_per_channel(plan_text: str):
    """The signals record's channel_held (scope account), routes_held (scope route) and sender_faults
    each feed a planned metric and a page; only the whole channel's hold is critical."""
    for key, field, severity in (
        ("channel_held", "channel_held=true", "CRITICAL"),
        ("route_held", "routes_held>0", "WARNING"),
        ("sender_faults", "sender_faults>0", "WARNING"),
    ):
        metric = planned_block(plan_text, f'google_logging_metric.condition["{key}"]')
        assert f"jsonPayload.{field}" in metric, key
        assert '"channel"    = "EXTRACT(jsonPayload.channel)"' in metric, key
        page = planned_block(plan_text, f'google_monitoring_alert_policy.threshold["{key}"]')
        assert f'severity              = "{severity}"' in page, key
        assert f"/{key}_records" in page and "metric.label.channel" in page, key
    for key, scope in (("channel_held", "<email|sms>"), ("route_held", "sms:<COUNTRY>")):
        assert f"verifyctl channel resume {scope}" in planned_block(
            plan_text, f'google_monitoring_alert_policy.threshold["{key}"]'
        )


def test_the_default_plan_binds_no_allusers_member(plan_text: str):
    """Domain Restricted Sharing (the default in organisations since 2024-05-03) accepts it: the
    public services turn the invoker check off instead, the private ones keep it."""
    assert "allUsers" not in plan_text and "allAuthenticatedUsers" not in plan_text
    for key in ("create", "confirm", "dispatch", "reconcile", "status", "reports"):
        block = planned_block(plan_text, f'google_cloud_run_v2_service.function["{key}"]')
        disabled = re.search(r"invoker_iam_disabled\s+= (\w+)", block).group(1)
        assert disabled == ("true" if key in ("confirm", "reports") else "false"), key
    assert not [
        a for a in planned_addresses(plan_text) if a.startswith("google_cloud_run_v2_service_iam_member.public")
    ]


def test_every_commented_block_of_the_example_plans_when_uncommented():
    """What .ci/run plans besides the example as it is: each optional block the example offers."""
    example = EXAMPLE.read_text()
    assert len(commented_blocks(example)) >= 6  # the blocks the example documents (the parser finds them)
    result = plan_of("all-blocks")
    addresses = set(planned_addresses(result.text))
    # public_access = "allUsers" binds the two public services and only them.
    assert {a for a in addresses if a.startswith("google_cloud_run_v2_service_iam_member.public")} == {
        'google_cloud_run_v2_service_iam_member.public["confirm"]',
        'google_cloud_run_v2_service_iam_member.public["reports"]',
    }
    # webhook_url turns on the webhook page and the WEBHOOK_SECRET secret.
    assert 'google_monitoring_alert_policy.threshold["webhook_oldest_ready"]' in addresses
    assert 'google_secret_manager_secret.secret["webhook_secret"]' in addresses
    page = planned_block(result.text, 'google_monitoring_alert_policy.threshold["webhook_oldest_ready"]')
    assert 'metric.label.channel = \\"webhook\\"' in page
    # a function's own setting (reports' env) reaches that function only.
    assert "SUPPRESSION_DAYS" in planned_block(result.text, 'google_cloud_run_v2_service.function["reports"]')
    assert "SUPPRESSION_DAYS" not in planned_block(result.text, 'google_cloud_run_v2_service.function["create"]')
    assert re.search(r"\+ peak_database_connections\s+= 84$", result.text, re.MULTILINE)
    # operators' database access: an IAM database user each (a group as a group), Cloud SQL's two
    # roles on the instance, and their database role from the grant job.
    assert {
        'google_sql_user.operator["group:oncall@example.com"]',
        'google_sql_user.operator["user:lead@example.com"]',
        'google_project_iam_member.database_client["group:oncall@example.com/roles/cloudsql.instanceUser"]',
        'google_project_iam_member.database_client["user:lead@example.com/roles/cloudsql.client"]',
    } <= addresses
    group = planned_block(result.text, 'google_sql_user.operator["group:oncall@example.com"]')
    assert re.search(r'type += "CLOUD_IAM_GROUP"', group) and re.search(r'name += "oncall@example.com"', group)
    grant = planned_block(result.text, 'google_cloud_run_v2_job.schema["grant"]')
    assert '"--reader=oncall@example.com"' in grant and '"--operator=lead@example.com"' in grant


def test_the_docs_state_what_the_plan_deploys(plan_text: str):
    """The budget, the function count and the scheduler jobs of docs/deploy.md and docs/capacity.md
    are the plan's (peak_database_connections, the services, the jobs), not numbers typed twice."""
    peak = re.search(r"^  \+ peak_database_connections\s+= (\d+)$", plan_text, re.MULTILINE).group(1)
    for doc in ("deploy.md", "capacity.md"):
        assert f"= **{peak}** connections" in blocks((DOCS / doc).read_text())["connection-budget"], doc
    functions = blocks((DOCS / "deploy.md").read_text())["functions"]
    addresses = planned_addresses(plan_text)
    services = [a for a in addresses if a.startswith("google_cloud_run_v2_service.function[")]
    jobs = [a for a in addresses if a.startswith("google_cloud_scheduler_job.")]
    assert functions.startswith(f"{len(services)} functions") and f"{len(jobs)} Cloud Scheduler jobs" in functions
    tier = re.search(r'\+ tier\s+= "([^"]+)"', plan_text).group(1)  # the Cloud SQL tier, connection_budget's
    assert f"the standard tier's `{tier}`" in blocks((DOCS / "capacity.md").read_text())["connection-budget"]


def test_a_partial_functions_map_overrides_only_what_it_names(tmp_path: Path, plan_run):
    var_file = tmp_path / "partial.tfvars"
    var_file.write_text(EXAMPLE.read_text() + "\nfunctions = { create = { max_instances = 20 } }\n")
    _, (copy, _example_arg, bundle_arg) = plan_run
    result = run_tool("plan", copy, f"-var-file={var_file}", bundle_arg)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert re.search(r"\+ peak_database_connections\s+= 64$", result.stdout, re.MULTILINE)  # 84 - 20
    create = planned_block(result.stdout, 'google_cloud_run_v2_service.function["create"]')
    assert re.search(r"max_instance_count\s+= 20", create) and 'timeout                          = "30s"' in create


def test_the_plan_bounds_the_fanout_queue_and_counts_its_connections(plan_text: str, tmp_path: Path, plan_run):
    """The example plans the queue at dispatch_max_parallel (4) and 4 more dispatch instances and
    connections; with dispatch_max_parallel = 0 there is no queue, no fan-out identity, no setting."""
    queue = planned_block(plan_text, "google_cloud_tasks_queue.dispatch_fanout[0]")
    assert re.search(r"max_concurrent_dispatches\s+= 4", queue)
    dispatch = planned_block(plan_text, 'google_cloud_run_v2_service.function["dispatch"]')
    assert re.search(r"max_instance_count\s+= 6", dispatch) and "DISPATCH_FANOUT_QUEUE" in dispatch
    assert re.search(r"\+ dispatch_fanout\s+= 4$", plan_text, re.MULTILINE)  # the budget's own entry
    var_file = tmp_path / "no-fanout.tfvars"
    var_file.write_text(EXAMPLE.read_text() + "\ndispatch_max_parallel = 0\n")
    _, (copy, _example_arg, bundle_arg) = plan_run
    result = run_tool("plan", copy, f"-var-file={var_file}", bundle_arg)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    addresses = planned_addresses(result.stdout)
    assert not [a for a in addresses if "fanout" in a] and "DISPATCH_FANOUT_QUEUE" not in result.stdout
    assert re.search(r"\+ peak_database_connections\s+= 80$", result.stdout, re.MULTILINE)


def test_a_budget_the_database_cannot_hold_fails_the_plan(tmp_path: Path, plan_run):
    var_file = tmp_path / "too-many.tfvars"
    var_file.write_text(EXAMPLE.read_text() + "\nfunctions = { create = { max_instances = 60 } }\n")
    _, (copy, _example_arg, bundle_arg) = plan_run
    result = run_tool("plan", copy, f"-var-file={var_file}", bundle_arg)
    assert result.returncode == 1 and "Connection budget exceeded" in result.stdout + result.stderr


def api_read_back(value):
    """What the Monitoring API returns for a dashboard: fields holding their default are dropped
    (hashicorp/terraform-provider-google#16173), so state holds the JSON without them."""
    if isinstance(value, dict):
        return {
            k: api_read_back(v)
            for k, v in value.items()
            if not (v == "" or v == [] or (k in ("xPos", "yPos") and v == 0))
        }
    if isinstance(value, list):
        return [api_read_back(v) for v in value]
    return value


def droppable_fields(value, path="") -> list[str]:
    if isinstance(value, dict):
        return [
            p
            for k, v in value.items()
            for p in ([f"{path}.{k}"] if api_read_back({k: v}) == {} else droppable_fields(v, f"{path}.{k}"))
        ]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in droppable_fields(v, f"{path}[{i}]")]
    return []


def test_the_dashboard_holds_no_field_the_api_drops(dashboard_json: dict):
    """An empty legend, empty thresholds or a zero position would be dropped by the API and come
    back as a change on every plan."""
    assert droppable_fields(dashboard_json) == []
    # The model of the API can tell: the old form (legendTemplate "", thresholds [], xPos 0) is caught.
    assert droppable_fields(
        {"tiles": [{"xPos": 0, "widget": {"xyChart": {"thresholds": [], "dataSets": [{"legendTemplate": ""}]}}}]}
    ) == [
        ".tiles[0].xPos",
        ".tiles[0].widget.xyChart.thresholds",
        ".tiles[0].widget.xyChart.dataSets[0].legendTemplate",
    ]
    # What is meant is still there: legends of the multi-metric chart, thresholds, positions.
    tiles = dashboard_json["mosaicLayout"]["tiles"]
    assert len(tiles) == 5
    legends = [d.get("legendTemplate") for t in tiles for d in t["widget"]["xyChart"]["dataSets"]]
    assert sorted(filter(None, legends)) == sorted(
        f"attempts_{o} ${{metric.labels.channel}}" for o in ("accepted", "retryable", "ambiguous", "failed")
    )
    assert [t["widget"]["xyChart"].get("thresholds", [{}])[0].get("value") for t in tiles] == [
        120,
        None,
        None,
        300,
        None,
    ]
    assert [(t.get("xPos", 0), t.get("yPos", 0)) for t in tiles] == [(0, 0), (24, 0), (0, 16), (24, 16), (0, 32)]


def test_a_second_plan_after_apply_shows_no_change_to_what_the_stand_in_can_compare(plan_run, dashboard_json, tmp_path):
    """tf-offline cannot apply, but it plans against a given state: a state holding what the API
    would have returned after the first apply (the dashboard as read back) plans no dashboard
    change, and a page at its address from before the map plans a move, not a destroy."""
    _, (copy, *args) = plan_run
    state = {
        "version": 4,
        "terraform_version": "1.11.4",
        "serial": 1,
        "outputs": {},
        "lineage": "8d0c5b8e-0000-4000-8000-000000000017",
        "resources": [
            _state_resource(
                "google_monitoring_dashboard",
                "signals",
                {
                    "id": "projects/123/dashboards/abc",
                    "project": "my-signup-prod",
                    "dashboard_json": json.dumps(
                        api_read_back(dashboard_json), separators=(",", ":"), sort_keys=True, ensure_ascii=False
                    ),
                },
            ),
            _state_resource(
                "google_monitoring_alert_policy",
                "oldest_ready",
                {
                    "id": "projects/my-signup-prod/alertPolicies/1",
                    "project": "my-signup-prod",
                    "name": "projects/my-signup-prod/alertPolicies/1",
                },
            ),
        ],
    }
    state_file = tmp_path / "applied.tfstate"
    state_file.write_text(json.dumps(state))
    result = run_tool("plan", copy, *args, f"-state={state_file}", "-refresh=false")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    changed = planned_addresses(result.stdout)
    assert "google_monitoring_dashboard.signals" not in changed
    # The pages became one map: the one written out before moves into it and is not recreated.
    assert "(moved from google_monitoring_alert_policy.oldest_ready)" in result.stdout
    assert 'google_monitoring_alert_policy.threshold["oldest_ready"] will be created' not in result.stdout
    assert re.search(r"^Plan: \d+ to add, \d+ to change, 0 to destroy\.$", result.stdout, re.MULTILINE)


def _state_resource(rtype: str, name: str, attributes: dict) -> dict:
    return {
        "mode": "managed",
        "type": rtype,
        "name": name,
        "provider": 'provider["registry.terraform.io/hashicorp/google"]',
        "instances": [{"schema_version": 0, "attributes": attributes}],
    }


def test_replaced_bundles_expire_and_the_live_one_stays(plan_text: str):
    bucket = planned_block(plan_text, "google_storage_bucket.source")
    condition = re.search(r"\+ condition \{(.*?)\}", bucket, re.DOTALL).group(1)
    assert re.search(r"days_since_noncurrent_time\s+= 30", condition)
    assert re.search(r'with_state\s+= "ARCHIVED"', condition)
    # ANDed with the above, either would keep the rule from ever matching a hash-named bundle.
    assert "num_newer_versions" not in condition and not re.search(r"\bage\s+=", condition)
    assert re.search(r"versioning \{\s*\n\s*\+ enabled = true", bucket)
