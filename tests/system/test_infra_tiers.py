"""The tiers of infra/tiers.tf, each planned by the real terraform (tf-offline, support/infra_plans.py:
the example is the standard tier): what each deploys, and what holds in every tier, the instance-cap
page on every service whose cap can be reached, the 429 page on all of them, a connection budget that
fits. The small tier: a shared-core zonal instance, no warm instance and no invocation kept open,
create nudging dispatch through its own queue and identity, the pages grouped in two conditions."""

from __future__ import annotations

import pytest

from support.infra_plans import plan_of

SERVICES = ("create", "confirm", "dispatch", "reconcile", "status", "reports")
PLANS = {"small": "small", "standard": "example", "large": "large"}


def planned(name: str) -> dict[str, dict]:
    """address -> planned values of every resource of the plan."""
    shown = plan_of(PLANS[name]).shown
    return {r["address"]: r["values"] for r in shown["planned_values"]["root_module"]["resources"]}


def env_of(values: dict, name: str) -> dict[str, str]:
    [container] = values[f'google_cloud_run_v2_service.function["{name}"]']["template"][0]["containers"]
    return {e["name"]: e.get("value") for e in container.get("env") or [] if not e.get("value_source")}


def outputs(name: str) -> dict:
    return {k: o.get("value") for k, o in plan_of(PLANS[name]).shown["planned_values"]["outputs"].items()}


def test_the_small_tier_idles_on_a_shared_core_zonal_instance_with_nothing_kept_open():
    values = planned("small")
    settings = values["google_sql_database_instance.main"]["settings"][0]
    assert (settings["tier"], settings["availability_type"]) == ("db-f1-micro", "ZONAL")
    flags = {f["name"]: f["value"] for f in settings["database_flags"]}
    assert flags["max_connections"] == "25"
    for key in SERVICES:
        scaling = values[f'google_cloud_run_v2_service.function["{key}"]']["template"][0]["scaling"][0]
        assert scaling["min_instance_count"] == 0, key
    assert sorted(a for a in values if a.startswith("google_cloud_scheduler_job")) == [
        'google_cloud_scheduler_job.tick["dispatch"]',
        'google_cloud_scheduler_job.tick["reconcile"]',
    ]  # no relay: nothing waits to be handed over
    dispatch = env_of(values, "dispatch")
    assert dispatch["DISPATCH_IDLE_WAIT"] == "false" and dispatch["SMS_MAX_PER_HOUR"] == "100"
    assert not [a for a in values if "dispatch_fanout" in a]  # one invocation is enough: no fan-out queue
    budget = outputs("small")["connection_budget"]
    assert budget["sources"]["dispatch_nudge"] == 1
    assert budget["peak"] + budget["reserved"] <= budget["max_connections"] == 25


def test_create_nudges_dispatch_through_its_own_queue_identity_and_path():
    values = planned("small")
    queue = values["google_cloud_tasks_queue.dispatch_nudge[0]"]
    assert queue["name"] == "verify-dispatch-nudge"
    assert queue["rate_limits"][0]["max_concurrent_dispatches"] == 1
    create, dispatch = env_of(values, "create"), env_of(values, "dispatch")
    nudger = "verify-nudge@my-signup-prod.iam.gserviceaccount.com"
    assert (
        create["DISPATCH_NUDGE_QUEUE"] == "projects/my-signup-prod/locations/europe-west1/queues/verify-dispatch-nudge"
    )
    assert create["DISPATCH_NUDGE_SERVICE_ACCOUNT"] == dispatch["DISPATCH_NUDGE_SERVICE_ACCOUNT"] == nudger
    assert create["DISPATCH_NUDGE_URL"].startswith("https://verify-dispatch-")
    assert nudger not in dispatch["ALLOWED_INVOKERS"]  # the scheduled path stays the scheduler's
    assert "DISPATCH_NUDGE_URL" not in dispatch and "DISPATCH_NUDGE_QUEUE" not in env_of(values, "confirm")
    # create may enqueue into this queue and act as the nudge identity; the identity may invoke dispatch
    assert values["google_cloud_tasks_queue_iam_member.create_enqueues[0]"]["role"] == "roles/cloudtasks.enqueuer"
    assert values["google_service_account_iam_member.create_acts_as_nudge[0]"]["role"] == "roles/iam.serviceAccountUser"
    invoker = values['google_cloud_run_v2_service_iam_member.invoker["dispatch/nudge"]']
    assert invoker["role"] == "roles/run.invoker"
    assert not [a for a in planned("standard") if "nudge" in a]  # the standard tier keeps an invocation waiting


def test_the_small_tier_pages_through_the_digest_and_the_absence_page():
    values = planned("small")
    pages = sorted(a for a in values if a.startswith("google_monitoring_alert_policy"))
    assert pages == ["google_monitoring_alert_policy.digest[0]", "google_monitoring_alert_policy.signals_absent"]
    [condition] = values["google_monitoring_alert_policy.digest[0]"]["conditions"]
    log_filter = condition["condition_matched_log"][0]["filter"]
    assert 'jsonPayload.event="page"' in log_filter  # the reconciler's record while a signal page holds
    assert 'textPayload:"no available instance"' in log_filter  # any service refused at its instance cap
    assert "httpRequest.status>=500" in log_filter
    assert all(f'"verify-{key}"' in log_filter for key in SERVICES)
    metrics = sorted(a for a in values if a.startswith("google_logging_metric"))
    assert metrics == ["google_logging_metric.signal_records"]  # no idle distribution points to pay for


@pytest.mark.parametrize("tier", ["standard", "large"])
def test_every_capped_service_has_its_instance_cap_page_and_all_have_the_429_page(tier):
    values = planned(tier)
    limits = outputs(tier)
    for key in ("create", "confirm", "dispatch", "status", "reports"):
        page = values[f'google_monitoring_alert_policy.threshold["instance_cap_{key}"]']
        service = values[f'google_cloud_run_v2_service.function["{key}"]']["template"][0]["scaling"][0]
        threshold = page["conditions"][0]["condition_threshold"][0]["threshold_value"]
        assert threshold == pytest.approx(0.8 * service["max_instance_count"] - 0.5), key
    refused = values['google_monitoring_alert_policy.threshold["run_429"]']["conditions"][0]
    assert all(f'"verify-{key}"' in refused["condition_threshold"][0]["filter"] for key in SERVICES)
    assert limits["tier"]["alerting"] == "per_page"


def test_the_large_tier_serves_eight_requests_per_instance_within_its_connection_budget():
    values = planned("large")
    settings = values["google_sql_database_instance.main"]["settings"][0]
    assert (settings["tier"], settings["availability_type"]) == ("db-custom-8-30720", "REGIONAL")
    for key in ("create", "confirm", "reports"):
        template = values[f'google_cloud_run_v2_service.function["{key}"]']["template"][0]
        assert template["max_instance_request_concurrency"] == 8
        assert env_of(values, key)["THREADS"] == "8"  # a connection per request thread
    budget = outputs("large")["connection_budget"]
    assert budget["peak"] + budget["reserved"] <= budget["max_connections"] == 400
    assert env_of(values, "dispatch")["SMS_MAX_PER_HOUR"] == "940000"
