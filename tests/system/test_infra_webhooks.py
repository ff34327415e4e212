"""Issue 12's terraform: the WEBHOOK_URL setting, the WEBHOOK_SECRET secret, the webhook page."""

from __future__ import annotations

from support.terraform_model import first, load_infra


def test_every_function_gets_the_url_and_only_dispatch_the_secret():
    infra = load_infra()
    assert infra.locals["common_env"]["WEBHOOK_URL"] == "${var.webhook_url}"
    assert infra.locals["secret_env"]["webhook_secret"] == "WEBHOOK_SECRET"
    assert 'var.webhook_url != "" ? ["webhook_secret"]' in infra.locals["enabled_secrets"]
    assert [k for k, s in infra.function_specs.items() if "webhook_secret" in s["secrets"]] == ["dispatch"]
    assert infra.variables["webhook_url"]["default"] == ""


def test_the_webhook_channel_pages_on_its_own_threshold_and_the_message_page_ignores_it():
    infra = load_infra()
    page = infra.resource("google_monitoring_alert_policy", "webhook_oldest_ready")
    assert page["count"] == '${var.webhook_url != "" ? 1 : 0}'
    condition = first(first(page["conditions"])["condition_threshold"])
    assert 'oldest_ready_seconds"]' in condition["filter"]
    assert condition["filter"].endswith('metric.label.channel = \\"webhook\\"')
    assert condition["threshold_value"] == "${var.webhook_oldest_ready_threshold_seconds}"
    others = infra.resource("google_monitoring_alert_policy", "oldest_ready")
    messages = first(first(others["conditions"])["condition_threshold"])
    assert messages["filter"].endswith('metric.label.channel != \\"webhook\\"')
    assert "runbook" in first(page["documentation"])["content"]
