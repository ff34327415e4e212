"""infra/fanout.tf, parsed with python-hcl2: the queue that bounds the dispatch fan-out, the least
privilege around it, the settings it gives the dispatch service only, and the pages that warn
before links expire or SMS pause (alerts.tf)."""

from __future__ import annotations

from signup_verification.delivery.config import SMS_MAX_PER_HOUR
from support.terraform_model import first, load_infra


def test_the_queue_bounds_the_fanout_at_dispatch_max_parallel():
    infra = load_infra()
    queue = infra.resource("google_cloud_tasks_queue", "dispatch_fanout")
    limits = first(queue["rate_limits"])
    assert limits["max_concurrent_dispatches"] == "${local.dispatch_max_parallel}"
    assert queue["count"] == "${local.fanout_on ? 1 : 0}" and queue["location"] == "${var.region}"
    assert infra.locals["fanout_queue"] == (
        "projects/${var.project_id}/locations/${var.region}/queues/${var.name}-dispatch-fanout"
    )
    assert queue["name"] == "${var.name}-dispatch-fanout"
    assert infra.variables["dispatch_max_parallel"]["default"] is None  # the tier's (infra/tiers.tf)
    assert {t: p["dispatch_max_parallel"] for t, p in infra.locals["tiers"].items()} == {
        "small": 0,
        "standard": 4,
        "large": 12,
    }
    assert infra.resource("google_project_service", "api")["for_each"] == "${local.apis}"
    assert '"cloudtasks.googleapis.com"' in infra.locals["apis"]


def test_only_dispatch_enqueues_only_as_the_fanout_identity_which_may_only_invoke_dispatch():
    infra = load_infra()
    enqueue = infra.resource("google_cloud_tasks_queue_iam_member", "dispatch_enqueues")
    assert enqueue["role"] == "roles/cloudtasks.enqueuer"
    assert enqueue["name"] == "${google_cloud_tasks_queue.dispatch_fanout[0].name}"  # this queue, not the project
    assert enqueue["member"] == '${google_service_account.function["dispatch"].member}'
    act_as = infra.resource("google_service_account_iam_member", "dispatch_acts_as_fanout")
    assert act_as["role"] == "roles/iam.serviceAccountUser"
    assert act_as["service_account_id"] == "${google_service_account.fanout[0].name}"
    assert act_as["member"] == '${google_service_account.function["dispatch"].member}'
    invokers = infra.locals["private_invokers"]
    assert '"dispatch/fanout" => {function = "dispatch", member = a.member}' in invokers
    # the identity check in the code gives each path its own caller (api/dispatch.py): the scheduled
    # path the scheduler's (ALLOWED_INVOKERS), the fan-out path the fan-out's, never each other's
    services = (infra.files["services.tf"]["locals"][0]["allowed_invokers"])["dispatch"]
    assert services == "${local.scheduler_email}"
    fanout_identity = infra.locals["dispatch_env"]["DISPATCH_FANOUT_SERVICE_ACCOUNT"]
    assert fanout_identity == '${local.fanout_on ? local.fanout_email : ""}'
    # nothing project-wide for it
    assert not any("fanout" in r["member"] for r in infra.resources("google_project_iam_member").values())


def test_the_fanout_and_pacing_settings_reach_the_dispatch_service_only():
    infra = load_infra()
    env = infra.locals["dispatch_env"]
    assert set(env) == {
        "DISPATCH_MAX_PARALLEL",
        "DISPATCH_FANOUT_QUEUE",
        "DISPATCH_FANOUT_URL",
        "DISPATCH_FANOUT_SERVICE_ACCOUNT",
        "EMAIL_MAX_PER_SECOND",
        "SMS_MAX_PER_SECOND",
        "TWILIO_SENDER_MPS",
        "DISPATCH_IDLE_WAIT",
        "DISPATCH_NUDGE_SERVICE_ACCOUNT",
    }
    assert env["DISPATCH_FANOUT_URL"] == '${local.fanout_on ? local.service_urls["dispatch"] : ""}'
    assert 'key == "dispatch" ? local.dispatch_env : {}' in infra.locals["function_env"]
    # the fan-out's instances come on top of dispatch's, and its connections in the budget
    assert "local.dispatch_extra" in infra.locals["instance_limits"]
    assert "local.dispatch_max_parallel" in infra.locals["dispatch_extra"]
    assert "dispatch_fanout" in infra.locals["connection_budget"]


def test_the_sms_budget_warns_at_80_percent_and_the_backlog_pages_against_the_ttl():
    infra = load_infra()
    assert (
        infra.locals["condition_records"]["sms_budget_warning"]["condition"]
        == "jsonPayload.sms_budget_used_percent>=80"
    )
    alerts = infra.locals["threshold_alerts"]
    for name in ("sms_budget_warning", "backlog_drain", "sms_budget", "oldest_ready"):
        assert f"{name} = merge(" in alerts.replace("\n", " "), name
    assert infra.locals["distributions"]["drain_seconds"]["field"] == "drain_seconds"
    assert "var.verification_ttl_seconds" in infra.locals["drain_threshold"]
    assert "0.2 * var.verification_ttl_seconds" in infra.locals["oldest_ready_threshold"]
    assert infra.variables["oldest_ready_threshold_seconds"]["default"] is None
    # The SMS budget follows the tier (a safety ceiling against pumping, not one global figure): the
    # standard tier's is the app's own default and carries the documented load (docs/capacity.md:
    # 100 verifications/s at peak, 20 % SMS, for an hour, x 1.3 headroom), the large tier's ten times
    # that, the small tier's a small one; the variable overrides it.
    assert infra.variables["sms_max_per_hour"]["default"] is None
    budgets = {t: p["sms_max_per_hour"] for t, p in infra.locals["tiers"].items()}
    assert budgets["standard"] == SMS_MAX_PER_HOUR.default >= 100 * 0.2 * 3600 * 1.3
    assert budgets["large"] >= 1000 * 0.2 * 3600 * 1.3 and budgets["small"] <= 100
