"""The platform around the functions, in infra/: who the pages reach and where each sends the
on-call (docs/runbook.md), the pages on the platform itself, the private-IP mode secure-by-default
organisations need, and the pinned build toolchain. Planned by the real terraform (tf-offline,
support/infra_plans.py: the plans .ci/run makes) where the evaluated values matter, parsed with
python-hcl2 where the wiring does."""

from __future__ import annotations

import re

import yaml

from support.infra_plans import EXAMPLE, plan_of, planned_block, run_tool
from support.terraform_model import INFRA, first, load_infra, planned_addresses

ROOT = INFRA.parent
RUNBOOK = ROOT / "docs" / "runbook.md"
SERVICES = ("create", "confirm", "dispatch", "reconcile", "status", "reports")


def runbook_headings() -> set[str]:
    return {m.group(1).strip() for m in re.finditer(r"^#{2,4} (.+)$", RUNBOOK.read_text(), re.M)}


def missing_runbook_sections(texts: dict[str, str], headings: set[str]) -> list[str]:
    """Each page whose text names no runbook section, or one the runbook does not have."""
    missing = []
    for address, text in sorted(texts.items()):
        named = re.findall(r'docs/runbook\.md, "([^"]+)"', text)
        if not named:
            missing.append(f"{address}: names no docs/runbook.md section")
        missing += [f'{address}: docs/runbook.md has no section "{n}"' for n in named if n not in headings]
    return missing


def test_every_page_names_its_runbook_section_and_the_runbook_has_it():
    """Both plans of .ci/run (the example, and with every optional block: the webhook page, the
    private-IP mode) and the other tiers', every alert policy of each: the on-call opens the section
    the page names."""
    headings = runbook_headings()
    for name in ("example", "all-blocks", "small", "large"):
        texts = plan_of(name).probe("alerts")
        assert len(texts) >= (2 if name == "small" else 20), name  # the small tier: the digest and the absence
        assert missing_runbook_sections(texts, headings) == [], name
    # The check can fail: a page without a section, or naming one the runbook lacks.
    assert missing_runbook_sections({"a": "no reference", "b": 'docs/runbook.md, "Nowhere"'}, headings) == [
        "a: names no docs/runbook.md section",
        'b: docs/runbook.md has no section "Nowhere"',
    ]


def test_every_page_reaches_the_required_email_channel():
    infra = load_infra()
    assert "default" not in infra.variables["notification_email"]  # required: no deployment pages nobody
    channel = infra.resource("google_monitoring_notification_channel", "email")
    assert channel["type"] == "email" and channel["labels"] == {"email_address": "${var.notification_email}"}
    assert infra.locals["notification_channels"] == (
        "${concat([google_monitoring_notification_channel.email.name], var.notification_channels)}"
    )
    policies = infra.resources("google_monitoring_alert_policy")
    assert len(policies) >= 3
    for name, policy in policies.items():
        assert policy["notification_channels"] == "${local.notification_channels}", name
    plan = plan_of("example").text
    assert '"email_address" = "oncall@example.com"' in planned_block(
        plan, "google_monitoring_notification_channel.email"
    )


def test_the_platform_pages_watch_cloud_run_cloud_sql_the_queue_and_the_build():
    plan = plan_of("example").text
    pages = {
        a.split('"')[1] for a in planned_addresses(plan) if a.startswith("google_monitoring_alert_policy.threshold[")
    }
    assert {"run_429", "run_5xx", "run_latency", "sql_cpu", "sql_connections", "sql_disk", "fanout_queue"} <= pages
    # Saturation per service whose cap can be reached, dispatch included, each against its own limit
    # (reconcile runs one instance by design: a tick it cannot take is the 429 page's, below).
    assert {p for p in pages if p.startswith("instance_cap_")} == {
        f"instance_cap_{k}" for k in ("create", "confirm", "dispatch", "status", "reports")
    }
    cap = planned_block(plan, 'google_monitoring_alert_policy.threshold["instance_cap_create"]')
    assert re.search(r"threshold_value\s+= 31\.5", cap) and 'service_name=\\"verify-create\\"' in cap
    dispatch = planned_block(plan, 'google_monitoring_alert_policy.threshold["instance_cap_dispatch"]')
    assert re.search(r"threshold_value\s+= 4\.3", dispatch)  # 0.8 x (2 scheduled + 4 fan-out) - 0.5
    refused = planned_block(plan, 'google_monitoring_alert_policy.threshold["run_429"]')
    assert 'response_code=\\"429\\"' in refused and all(f'\\"verify-{k}\\"' in refused for k in SERVICES)
    errors = planned_block(plan, 'google_monitoring_alert_policy.threshold["run_5xx"]')
    assert 'response_code_class=\\"5xx\\"' in errors and all(f'\\"verify-{k}\\"' in errors for k in SERVICES)
    connections = planned_block(plan, 'google_monitoring_alert_policy.threshold["sql_connections"]')
    assert re.search(r"threshold_value\s+= 90$", connections, re.M)  # 0.9 x max_connections 100
    assert 'database_id=\\"my-signup-prod:verify-pg\\"' in connections
    queue = planned_block(plan, 'google_monitoring_alert_policy.threshold["fanout_queue"]')
    assert 'queue_id=\\"verify-dispatch-fanout\\"' in queue and re.search(r"threshold_value\s+= 4$", queue, re.M)
    build = planned_block(plan, "google_monitoring_alert_policy.build_failed[0]")
    assert 'resource.type=\\"build\\"' in build and 'textPayload=\\"ERROR\\"' in build


def test_the_default_keeps_the_connector_only_public_ip_and_creates_no_network():
    plan = plan_of("example").text
    assert not [a for a in planned_addresses(plan) if a.startswith(("google_compute_", "google_service_networking"))]
    instance = planned_block(plan, "google_sql_database_instance.main")
    assert re.search(r"ipv4_enabled\s+= true", instance) and "private_network" not in instance
    assert "vpc_access" not in plan and "DB_IP_TYPE" not in plan


def test_private_ip_puts_every_service_and_job_in_the_vpc_and_the_instance_behind_the_peering():
    """db_connectivity = "private_ip" (the example's commented block, planned by .ci/run): what an
    organisation enforcing sql.restrictPublicIp needs, and what deploy.sh chooses there."""
    plan = plan_of("all-blocks").text
    addresses = set(planned_addresses(plan))
    assert {
        "google_compute_network.private[0]",
        "google_compute_subnetwork.run[0]",
        "google_compute_firewall.deny_ingress[0]",
        "google_compute_global_address.sql_peering[0]",
        "google_service_networking_connection.sql[0]",
        'google_project_service.api["servicenetworking.googleapis.com"]',
        'google_project_service.api["compute.googleapis.com"]',
    } <= addresses
    instance = planned_block(plan, "google_sql_database_instance.main")
    assert re.search(r"ipv4_enabled\s+= false", instance) and "private_network" in instance
    peering = planned_block(plan, "google_compute_global_address.sql_peering[0]")
    assert '"VPC_PEERING"' in peering and re.search(r"prefix_length\s+= 20", peering)
    targets = [f'google_cloud_run_v2_service.function["{k}"]' for k in SERVICES] + [
        f'google_cloud_run_v2_job.schema["{j}"]' for j in ("migrate", "grant")
    ]
    for address in targets:
        block = planned_block(plan, address)
        assert re.search(r'egress\s+= "PRIVATE_RANGES_ONLY"', block), address
        assert "network_interfaces" in block, address
        assert re.search(r'name\s+= "DB_IP_TYPE"\s*\n\s*\+ value\s+= "private"', block) or re.search(
            r'"DB_IP_TYPE"\s+= "private"', block
        ), address


def test_a_subnet_too_small_for_the_instances_fails_the_plan(tmp_path):
    plan = plan_of("example")
    var_file = tmp_path / "small.tfvars"
    var_file.write_text(
        EXAMPLE.read_text()
        + '\ndb_connectivity = "private_ip"\nprivate_network = { run_subnet_cidr = "10.8.0.0/25" }\n'
    )
    result = run_tool("plan", plan.copy, f"-var-file={var_file}", plan.bundle_arg)
    assert result.returncode == 1 and "too small for Direct VPC egress" in result.stdout + result.stderr


def test_the_build_runs_only_images_pinned_by_digest():
    """A tag can move between two builds of the same bundle: the builder and every step's image are
    digests, and a builder given by tag alone fails validation."""
    digest = re.compile(r"@sha256:[0-9a-f]{64}$")
    build = yaml.safe_load((INFRA / "deploy" / "cloudbuild.yaml").read_text())
    for step in build["steps"]:
        assert digest.search(step["name"]), step["id"]
    builder = load_infra().variables["builder"]
    assert digest.search(builder["default"]) and "google-22" in builder["default"]  # Python 3.11's builder
    assert first(builder["validation"])["condition"] == '${can(regex("@sha256:[0-9a-f]{64}$", var.builder))}'


def test_twilios_test_sender_fails_the_plan(tmp_path):
    """Every function refuses Twilio's test-credential sender in production: the plan says so first."""
    plan = plan_of("example")
    var_file = tmp_path / "test-sender.tfvars"
    var_file.write_text(EXAMPLE.read_text().replace('"+14155550100"', '"+15005550006"'))
    result = run_tool("plan", plan.copy, f"-var-file={var_file}", plan.bundle_arg)
    assert result.returncode == 1 and "Twilio's test-credential senders" in result.stdout + result.stderr
